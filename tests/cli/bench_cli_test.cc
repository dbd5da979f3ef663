// `bertfit bench` through the binary: both modes, every precision, a model folder and a base-size
// architecture, and the refusals (int8 training, sizes that cannot run). The figures themselves
// are measured in bench/ and docs/PERFORMANCE.md, never asserted here: only that a run reports
// what it ran, with positive, finite timings.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli_util.h"

namespace bertfit::testing {
namespace {

nlohmann::json run_bench(const std::string& args) {
  RunResult r = run_bertfit("bench " + args);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  if (r.exit_code != 0) return {};
  return nlohmann::json::parse(r.out);
}

void expect_sane(const nlohmann::json& j, const std::string& mode, const std::string& precision,
                 int batch, int seq) {
  EXPECT_EQ(j["mode"], mode);
  EXPECT_EQ(j["precision"], precision);
  EXPECT_EQ(j["batch_size"], batch);
  EXPECT_EQ(j["seq_len"], seq);
  for (const char* key : {"ms_per_step", "samples_per_s", "gflops", "matmul_peak_gflops"}) {
    ASSERT_TRUE(j.contains(key)) << key;
    const double v = j[key].get<double>();
    EXPECT_TRUE(std::isfinite(v) && v > 0) << key << " " << v;
  }
}

TEST(BenchCli, BothModesInEveryPrecisionOnAModelFolder) {
  TempDir tmp;
  init_tiny_model(tmp / "m");
  for (const std::string precision : {"fp32", "bf16", "int8"}) {
    for (const std::string mode : {"train", "infer"}) {
      if (mode == "train" && precision == "int8") continue;
      SCOPED_TRACE(mode + " " + precision);
      const nlohmann::json j =
          run_bench(mode + " --model " + (tmp / "m") + " --batch-size 2 --seq-len 9 --steps 2 " +
                    "--warmup 1 --threads 1 --precision " + precision);
      if (j.is_null()) continue;
      // bf16 runs as fp32 on a CPU without native bf16 products (with a warning).
      expect_sane(j, mode, j["precision"] == "fp32" ? "fp32" : precision, 2, 9);
    }
  }
}

TEST(BenchCli, BaseSizeArchitectureWithoutAModel) {
  const nlohmann::json j = run_bench(
      "infer --arch bert --batch-size 1 --seq-len 8 --steps 1 "
      "--warmup 0 --precision int8");
  if (!j.is_null()) {
    expect_sane(j, "infer", "int8", 1, 8);
    EXPECT_EQ(j["arch"], "bert");
  }
}

// Every family at its base size (RoBERTa's 514 positions, ELECTRA's projected embeddings), and
// a golden token classifier (its head on every token).
TEST(BenchCli, EveryFamilyAndATokenClassifier) {
  for (const char* arch :
       {"distilbert", "bert", "roberta", "xlm-roberta", "camembert", "electra"}) {
    SCOPED_TRACE(arch);
    const nlohmann::json j = run_bench(std::string("infer --arch ") + arch +
                                       " --batch-size 1 --seq-len 8 --steps 1 --warmup 0");
    if (j.is_null()) continue;
    expect_sane(j, "infer", "fp32", 1, 8);
    EXPECT_EQ(j["arch"], arch);
  }
  const nlohmann::json e = run_bench(
      "train --arch electra --batch-size 1 --seq-len 8 --steps 1 --warmup 0 --precision fp32");
  if (!e.is_null()) expect_sane(e, "train", "fp32", 1, 8);
  TempDir tmp;
  std::filesystem::copy(shared_dir() + "/golden/roberta-tokcls-tiny/model", tmp / "m");
  nlohmann::json config = nlohmann::json::parse(read_text(tmp / "m/config.json"));
  config["architectures"] = {"RobertaForTokenClassification"};
  write_text(tmp / "m/config.json", config.dump());
  for (const std::string mode : {"train", "infer"}) {
    const nlohmann::json t =
        run_bench(mode + " --model " + (tmp / "m") + " --batch-size 2 --seq-len 9 --steps 1");
    if (!t.is_null()) expect_sane(t, mode, "fp32", 2, 9);
  }
}

TEST(BenchCli, RefusesWhatCannotRun) {
  TempDir tmp;
  init_tiny_model(tmp / "m");
  const std::string model = " --model " + (tmp / "m");
  RunResult r = run_bertfit("bench train" + model + " --precision int8");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("int8 is for inference"), std::string::npos) << r.err;
  r = run_bertfit("bench infer" + model + " --steps 0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--steps"), std::string::npos) << r.err;
  r = run_bertfit("bench sideways" + model);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("mode"), std::string::npos) << r.err;
}

// `bench scaling`: the model of comm/scaling_model.h, checked against the formulas worked by
// hand for inputs where each term shows alone (times are exact up to double rounding).
TEST(BenchScalingCli, EachTermOfTheModel) {
  // 1e6 floats of fp32 gradient, no sparse head: 4e6 bytes. At 1 Gbit/s (1.25e8 bytes/s) a
  // 2-node ring all-reduce moves 2(N-1)/N = 1 times the bytes: 0.032 s.
  const std::string base = "scaling --params 1000000 --compute-s 2 --link-gbit 1 --nodes 1,2,4";
  nlohmann::json j = run_bench(base + " --latency-us 0 --overlap 0");
  ASSERT_EQ(j["points"].size(), 3u);
  EXPECT_EQ(j["params"], 1000000);
  const nlohmann::json& one = j["points"][0];
  EXPECT_EQ(one["nodes"], 1);
  EXPECT_DOUBLE_EQ(one["step_s"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(one["speedup"].get<double>(), 1.0);
  const nlohmann::json& two = j["points"][1];
  EXPECT_NEAR(two["allreduce_s"].get<double>(), 0.032, 1e-12);
  EXPECT_NEAR(two["exposed_s"].get<double>(), 0.032, 1e-12);
  EXPECT_NEAR(two["step_s"].get<double>(), 2.032, 1e-12);
  EXPECT_NEAR(two["speedup"].get<double>(), 2 * 2 / 2.032, 1e-12);
  // 4 nodes: 2 * 3/4 = 1.5 times the bytes.
  EXPECT_NEAR(j["points"][2]["allreduce_s"].get<double>(), 0.048, 1e-12);
  // Full overlap within a long enough backward hides it all.
  j = run_bench(base + " --latency-us 0 --overlap 1");
  EXPECT_NEAR(j["points"][1]["exposed_s"].get<double>(), 0.0, 1e-12);
  EXPECT_NEAR(j["points"][1]["step_s"].get<double>(), 2.0, 1e-12);
  // ... but never more than the backward: 0.01 of 2 s hides 0.02 s of the 0.032 s.
  j = run_bench(base + " --latency-us 0 --overlap 1 --backward-fraction 0.01");
  EXPECT_NEAR(j["points"][1]["exposed_s"].get<double>(), 0.012, 1e-12);
  // Latency: 4 buckets of 1 MB, 2(N-1) = 2 rounds each, 100 us a round: 0.0008 s more.
  j = run_bench(base + " --latency-us 100 --overlap 0 --bucket-mb 1");
  EXPECT_NEAR(j["points"][1]["allreduce_s"].get<double>(), 0.0328, 1e-12);
  // Communication CPU: each rank sends and receives 2 * 1/2 * 4e6 bytes = 0.008 GB; at
  // 5 core-s per GB on 0.5 core: 0.08 s.
  j = run_bench(base + " --latency-us 0 --overlap 1 --comm-cpu 5 --cores-per-node 0.5");
  EXPECT_NEAR(j["points"][1]["comm_cpu_s"].get<double>(), 0.08, 1e-12);
  EXPECT_NEAR(j["points"][1]["step_s"].get<double>(), 2.08, 1e-12);
  // bf16 on the wire halves the bytes.
  j = run_bench(base + " --latency-us 0 --overlap 0 --wire-bf16");
  EXPECT_NEAR(j["points"][1]["allreduce_s"].get<double>(), 0.016, 1e-12);
  // A sparse head of 1000 x 100 floats, 10 rows per node touched: on 2 nodes 20 rows, 8000
  // bytes, never hidden; the dense rest (9e5 floats) is hidden whole.
  j = run_bench(base +
                " --latency-us 0 --overlap 1 --embedding-rows 1000 --embedding-width 100"
                " --touched-rows 10 --touched-exponent 1");
  EXPECT_NEAR(j["points"][1]["exposed_s"].get<double>(), 8000 / 1.25e8, 1e-12);
  EXPECT_NEAR(j["points"][1]["payload_mb"].get<double>(), (9e5 * 4 + 8000) / 1e6, 1e-12);
  // Nodes share tokens: with exponent 0.5, 4 nodes touch 10 * 2 = 20 rows, not 40.
  j = run_bench(base +
                " --latency-us 0 --overlap 1 --embedding-rows 1000 --embedding-width 100"
                " --touched-rows 10 --touched-exponent 0.5");
  EXPECT_NEAR(j["points"][2]["exposed_s"].get<double>(), 1.5 * 8000 / 1.25e8, 1e-12);
}

// The gradient's size comes from the architecture's layout: DistilBERT-base with a 2-label head
// has 66,955,010 parameters (transformers' DistilBertForSequenceClassification), of which the
// word embeddings are 30522 x 768.
TEST(BenchScalingCli, SizesFromTheArchitecture) {
  nlohmann::json j = run_bench("scaling --arch distilbert --compute-s 1.2");
  EXPECT_EQ(j["params"], 66955010);
  EXPECT_EQ(j["embedding_rows"], 30522);
  EXPECT_EQ(j["embedding_width"], 768);
  EXPECT_EQ(j["points"].size(), 7u);  // 1, 2, 4, ..., 64 by default
  double last = 0;
  for (const auto& p : j["points"]) {  // more nodes, more samples per second
    const double rate = p["nodes"].get<double>() / p["step_s"].get<double>();
    EXPECT_GT(rate, last) << p;
    last = rate;
  }
}

// A --model folder's own sizes: the tiny DistilBERT (dim 32) keeps the 30522-row vocabulary,
// so its gradient is the 30522 x 32 word embedding plus the rest, and refuses --params beside it.
TEST(BenchScalingCli, SizesFromAModelFolder) {
  TempDir tmp;
  init_tiny_model(tmp / "m");
  nlohmann::json j = run_bench("scaling --model " + (tmp / "m") + " --compute-s 1 --nodes 2");
  EXPECT_EQ(j["model"], tmp / "m");
  EXPECT_EQ(j["embedding_rows"], 30522);
  EXPECT_EQ(j["embedding_width"], 32);
  EXPECT_GT(j["params"].get<std::int64_t>(), 30522 * 32);
  EXPECT_LT(j["params"].get<std::int64_t>(), 30522 * 32 + 512 * 32 + 100000);
  RunResult r =
      run_bertfit("bench scaling --model " + (tmp / "m") + " --params 1000 --compute-s 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--params and --model"), std::string::npos) << r.err;
}

TEST(BenchScalingCli, RefusesInputsOutOfRange) {
  const std::string base = "bench scaling --params 1000 ";
  for (auto [args, needle] :
       {std::pair{"", "--compute-s"},
        {"--compute-s 1 --overlap 2", "--overlap"},
        {"--compute-s 1 --nodes 0", "--nodes"},
        {"--compute-s 1 --nodes 2,x", "--nodes: 'x'"},
        {"--compute-s 1 --link-gbit 0", "--link-gbit"},
        {"--compute-s 1 --embedding-rows 100 --embedding-width 100", "does not fit"}}) {
    RunResult r = run_bertfit(base + args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\n" << r.err;
  }
}

TEST(TrainCliInt8, TrainingInInt8IsRefusedWithAMessage) {
  TempDir tmp;
  init_tiny_model(tmp / "m");
  write_text(tmp / "d.tsv", "text\tlabel\na b\t0\nc d\t1\n");
  RunResult r =
      run_bertfit("train --model " + (tmp / "m") + " --output " + (tmp / "out") + " --train-file " +
                  (tmp / "d.tsv") + " --text-a-column text --label-column label --precision int8");
  EXPECT_NE(r.exit_code, 0);  // refused by the flag itself: train does not offer int8
  EXPECT_NE(r.err.find("int8 is for inference"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp / "out"));
}

// tune's flags: --seconds times steps until the time passed, --no-peak skips the product peak,
// --start-file holds the timed steps until the file exists (announced by `bench: ready`).
TEST(BenchCli, SecondsNoPeakAndStartFile) {
  TempDir tmp;
  init_tiny_model(tmp / "m");
  const std::string start = tmp / "start";
  std::thread starter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    write_text(start, "");
  });
  const auto begin = std::chrono::steady_clock::now();
  const RunResult r = run_bertfit("bench infer --model " + (tmp / "m") +
                                  " --batch-size 2 --seq-len 9 --steps 2 --warmup 1 --seconds 0.3"
                                  " --no-peak --start-file " +
                                  start);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  starter.join();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("bench: ready"), std::string::npos) << r.err;
  EXPECT_GE(waited, 1.5);  // it waited for the file (a lower bound, not a speed)
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j.contains("matmul_peak_gflops"));
  EXPECT_FALSE(j.contains("fraction_of_peak"));
  EXPECT_GE(j["seconds"].get<double>(), 0.3);
  EXPECT_GT(j["steps"].get<int>(), 2);  // a tiny model's forward takes well under 0.15 s
  EXPECT_NEAR(j["mean_samples_per_s"].get<double>(),
              2 * j["steps"].get<int>() / j["seconds"].get<double>(), 1e-6);
  const RunResult bad = run_bertfit("bench infer --model " + (tmp / "m") + " --seconds -1");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("--seconds"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace bertfit::testing
