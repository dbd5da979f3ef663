// `bertfit bench scaling` (cmd_bench_scaling.cc): its flags and its action, which cmd_bench.cc
// adds to the bench command's mode.
#pragma once

#include <cstdint>
#include <string>

#include "flags/flag.h"
#include "model/family.h"

namespace bertfit::cli {

struct BenchScalingOptions {
  double compute_s = 0;  // required in scaling mode
  std::string nodes = "1,2,4,8,16,32,64";
  double link_gbit = 25;
  double latency_us = 30;
  double overlap = 1;
  double backward_fraction = 0.6;
  double comm_cpu = 0;
  double cores_per_node = 32;
  std::int64_t touched_rows = 583;  // MRPC: a batch of 32 pairs, median of 20 (PERFORMANCE.md)
  double touched_exponent = 0.66;   // MRPC: 9079 rows for 64 such batches
  std::int64_t params = 0;
  std::int64_t embedding_rows = 0;
  std::int64_t embedding_width = 0;
  double bucket_mb = 8;
  bool wire_bf16 = false;
};

FlagTable bench_scaling_flags(BenchScalingOptions& s);
// Prints the prediction as one JSON object. Throws Error on inputs out of range.
void run_bench_scaling(const BenchScalingOptions& s, const ModelFamily& arch,
                       const std::string& model_dir, const std::string& revision);

}  // namespace bertfit::cli
