// `bertfit bench scaling`: predicted data-parallel step time, speedup and efficiency on N nodes
// (comm/scaling_model.h) from one node's measured compute per step (`bertfit bench train`, or a
// training run's step_seconds), the gradient's size (the --arch's base-size layout, a --model's,
// or --params for a model bertfit has no family for), the link and the overlap bertfit achieves.
// Prints one JSON object: the inputs and a row per node count.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/bertfit/bench_scaling.h"
#include "apps/bertfit/model_source.h"
#include "base/error.h"
#include "base/file.h"
#include "comm/scaling_model.h"
#include "model/config.h"
#include "model/param_layout.h"

namespace bertfit::cli {
namespace {

std::vector<int> parse_nodes(const std::string& text) {
  std::vector<int> nodes;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    std::size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || n < 1 || n > 1 << 20) {
      throw_error("--nodes: '", item, "' is not a node count (comma-separated integers >= 1)");
    }
    nodes.push_back(n);
  }
  if (nodes.empty()) throw_error("--nodes: give at least one node count");
  return nodes;
}

}  // namespace

FlagTable bench_scaling_flags(BenchScalingOptions& s) {
  return {
      {"--compute-s", "scaling: one node's step without communication, s (from `bench train`)",
       &s.compute_s},
      {"--nodes", "scaling: node counts to predict, comma-separated", &s.nodes},
      {"--link-gbit", "scaling: each node's link, Gbit/s", &s.link_gbit},
      {"--latency-us", "scaling: one message's latency, us", &s.latency_us},
      {"--overlap", "scaling: fraction of the dense all-reduce backward hides (0-1, measured)",
       &s.overlap},
      {"--backward-fraction", "scaling: share of the step spent in backward", &s.backward_fraction},
      {"--comm-cpu",
       "scaling: communication CPU, core-s per GB sent and received (0: RDMA, no CPU copy)",
       &s.comm_cpu},
      {"--cores-per-node",
       "scaling: cores that compute on a node (the comm CPU is taken from them)",
       &s.cores_per_node},
      {"--touched-rows", "scaling: word-embedding rows one node's batch touches per step",
       &s.touched_rows},
      {"--touched-exponent",
       "scaling: rows N nodes touch = --touched-rows x N^this (1: no token shared between nodes)",
       &s.touched_exponent},
      {"--params",
       "scaling: gradient length instead of the model's (with --embedding-rows/--embedding-width)",
       &s.params},
      {"--embedding-rows", "scaling: with --params: the word embedding's rows (vocabulary)",
       &s.embedding_rows},
      {"--embedding-width", "scaling: with --params: the word embedding's width",
       &s.embedding_width},
      {"--bucket-mb", "Gradient all-reduce bucket size in MB", &s.bucket_mb},
      {"--wire-bf16", "scaling: bf16 on the wire (train's --grad-comm-dtype bf16)", &s.wire_bf16},
  };
}

void run_bench_scaling(const BenchScalingOptions& s, const ModelFamily& arch,
                       const std::string& model_dir, const std::string& revision) {
  ScalingInputs in;
  std::string source;
  if (s.params > 0) {
    if (!model_dir.empty()) throw_error("--params and --model: give one");
    in.params = s.params;
    in.head_rows = s.embedding_rows;
    in.head_width = s.embedding_width;
    source = "--params";
  } else {
    if (s.embedding_rows != 0 || s.embedding_width != 0) {
      throw_error("--embedding-rows and --embedding-width go with --params");
    }
    const ModelConfig config =
        model_dir.empty()
            ? ModelConfig::defaults(arch)
            : load_model_config(join_path(resolve_model_flag(model_dir, revision), "config.json"));
    const ParamLayout layout(config);
    const ParamEntry& word = layout.entry(Role::kWordEmb);
    in.params = layout.total();
    in.head_rows = word.shape.dims[0];
    in.head_width = word.shape.dims[1];
    source = model_dir.empty() ? std::string(arch.model_type) + " (base size)" : model_dir;
  }
  in.compute_s = s.compute_s;
  in.backward_fraction = s.backward_fraction;
  in.touched_rows_per_node = s.touched_rows;
  in.touched_exponent = s.touched_exponent;
  in.wire_bytes = s.wire_bf16 ? 2 : 4;
  in.bucket_bytes = s.bucket_mb * 1e6;
  in.link_gbit = s.link_gbit;
  in.latency_us = s.latency_us;
  in.overlap = s.overlap;
  in.comm_cpu_core_s_per_gb = s.comm_cpu;
  in.cores_per_node = s.cores_per_node;
  nlohmann::json rows = nlohmann::json::array();
  for (const ScalingPoint& p : predict_scaling(in, parse_nodes(s.nodes))) {
    rows.push_back({{"nodes", p.nodes},
                    {"payload_mb", p.payload_mb},
                    {"allreduce_s", p.allreduce_s},
                    {"exposed_s", p.exposed_s},
                    {"comm_cpu_s", p.comm_cpu_s},
                    {"step_s", p.step_s},
                    {"speedup", p.speedup},
                    {"efficiency", p.efficiency}});
  }
  nlohmann::json j{{"mode", "scaling"},
                   {"model", source},
                   {"params", in.params},
                   {"embedding_rows", in.head_rows},
                   {"embedding_width", in.head_width},
                   {"compute_s", in.compute_s},
                   {"link_gbit", in.link_gbit},
                   {"latency_us", in.latency_us},
                   {"overlap", in.overlap},
                   {"comm_cpu_core_s_per_gb", in.comm_cpu_core_s_per_gb},
                   {"cores_per_node", in.cores_per_node},
                   {"touched_rows", in.touched_rows_per_node},
                   {"touched_exponent", in.touched_exponent},
                   {"wire", s.wire_bf16 ? "bf16" : "fp32"},
                   {"points", rows}};
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace bertfit::cli
