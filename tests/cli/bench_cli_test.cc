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
