// `bertfit train --resume` through the binary, on one process (docs/DESIGN.md, "Resume"): a
// finished run is extended by a larger --max-steps or --epochs, on the learning rates Trainer
// 4.28.1 applies (tests/fixtures/resume_lr_oracle.py), appending to metrics.jsonl; a length
// shorter than what was done is refused; an explicit --batch-size / --grad-accum must keep the
// checkpoint's global batch, and the error names the shapes that would. Resuming on another
// number of ranks is tested under mpirun in tests/comm/comm_train_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"

namespace bertfit::testing {
namespace {

std::string mrpc() { return shared_dir() + "/data/glue/MRPC"; }

std::vector<nlohmann::json> metrics(const std::string& run_dir) {
  std::vector<nlohmann::json> records;
  std::istringstream in(read_text(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

nlohmann::json trainer_state(const std::string& run_dir) {
  return nlohmann::json::parse(read_text(run_dir + "/checkpoint/trainer_state.json"));
}

// A user error: exit 1 and one line naming what to do.
void expect_one_line_error(const RunResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

class Resume : public ::testing::Test {
 protected:
  void SetUp() override { init_tiny_model(tmp_ / "model"); }
  // --max-seq-len 128: no MRPC row is truncated, so stderr holds no warning besides an error.
  std::string train(const std::string& extra, int batch = 16) {
    return "train --model " + (tmp_ / "model") + " --output " + (tmp_ / "out") + " --batch-size " +
           std::to_string(batch) +
           " --lr 1e-3 --warmup-steps 1 --max-seq-len 128 --eval-every never"
           " --log-every 1 --threads 2 " +
           extra;
  }
  std::string glue(const std::string& extra, int batch = 16) {
    return train("--task mrpc --data " + mrpc() + " " + extra, batch);
  }
  TempDir tmp_;
};

TEST_F(Resume, ExtendsAFinishedRunOnTrainersLearningRates) {
  RunResult first = run_bertfit(glue("--max-steps 4"));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string resume = " --resume " + (tmp_ / "out");
  RunResult longer = run_bertfit(glue("--max-steps 8" + resume));
  ASSERT_EQ(longer.exit_code, 0) << longer.err;
  EXPECT_EQ(nlohmann::json::parse(last_line(longer.out))["steps"], 8) << longer.out;

  // The step records of both parts, the first run's final record between them, the new one last.
  // The LR each step applied, as tests/fixtures/resume_lr_oracle.py prints for Trainer: step 5
  // keeps the finished schedule's LR (0, restored with the optimizer), steps 6-8 follow the
  // schedule of 8 steps (1e-3 · (8 - s) / 7 at s = 5, 6, 7).
  const double want[] = {0.0, 1e-3, 2e-3 / 3, 1e-3 / 3, 0.0, 3e-3 / 7, 2e-3 / 7, 1e-3 / 7};
  std::vector<double> lrs;
  std::vector<int> finals;
  for (const nlohmann::json& r : metrics(tmp_ / "out")) {
    if (r.contains("lr")) {
      EXPECT_EQ(r["step"], static_cast<int>(lrs.size()) + 1);
      lrs.push_back(r["lr"].get<double>());
    }
    if (r.value("final", false)) finals.push_back(r["steps"].get<int>());
  }
  ASSERT_EQ(lrs.size(), 8u);
  for (int s = 0; s < 8; ++s) EXPECT_NEAR(lrs[s], want[s], 1e-15) << "step " << s + 1;
  EXPECT_EQ(finals, (std::vector<int>{4, 8}));
  EXPECT_TRUE(metrics(tmp_ / "out").back().value("final", false));
  nlohmann::json state = trainer_state(tmp_ / "out");
  EXPECT_EQ(state["step"], 8);
  EXPECT_EQ(state["samples_seen"], 8 * 16);
  EXPECT_EQ(state["total_samples"], 8 * 16);

  // The same length again: the run is finished, nothing to do.
  RunResult again = run_bertfit(glue("--max-steps 8" + resume));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(last_line(again.out))["already_finished"], true) << again.out;

  // Fewer steps than the checkpoint has done: refused, nothing written.
  const std::size_t records = metrics(tmp_ / "out").size();
  expect_one_line_error(run_bertfit(glue("--max-steps 6" + resume)),
                        "--max-steps 6 is fewer than the 8 steps the checkpoint has done");
  EXPECT_EQ(metrics(tmp_ / "out").size(), records);
}

TEST_F(Resume, ExtendsAFinishedRunByEpochs) {
  std::string tsv = "text\tlabel\n";
  for (int i = 0; i < 40; ++i)
    tsv += (i % 2 ? "good fine day " : "bad awful night ") + std::to_string(i) + "\t" +
           std::to_string(i % 2) + "\n";
  write_text(tmp_ / "train.tsv", tsv);
  const std::string data =
      "--train-file " + (tmp_ / "train.tsv") + " --text-a-column text --label-column label ";
  RunResult first = run_bertfit(train(data + "--epochs 1"));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(nlohmann::json::parse(last_line(first.out))["steps"], 3) << first.out;  // 16+16+8
  const std::string resume = " --resume " + (tmp_ / "out");
  RunResult longer = run_bertfit(train(data + "--epochs 2" + resume));
  ASSERT_EQ(longer.exit_code, 0) << longer.err;
  EXPECT_EQ(nlohmann::json::parse(last_line(longer.out))["steps"], 6) << longer.out;
  EXPECT_EQ(trainer_state(tmp_ / "out")["samples_seen"], 80);
  expect_one_line_error(run_bertfit(train(data + "--epochs 1.5" + resume)),
                        "--epochs 1.5 is 60 samples, fewer than the 80 the checkpoint has seen");
}

TEST_F(Resume, AnExplicitBatchShapeMustKeepTheGlobalBatch) {
  RunResult first = run_bertfit(glue("--max-steps 2"));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string resume = " --resume " + (tmp_ / "out");
  expect_one_line_error(run_bertfit(glue("--max-steps 4" + resume, 5)),
                        "but the checkpoint's run takes 16 samples per optimizer step (1 rank × "
                        "16 × 1 accumulation); to keep it on 1 rank give --batch-size 16 "
                        "--grad-accum 1, --batch-size 8 --grad-accum 2");
  // 8 × 2 accumulation keeps 16 samples per step (a smaller batch in memory).
  RunResult halves = run_bertfit(glue("--max-steps 4 --grad-accum 2" + resume, 8));
  ASSERT_EQ(halves.exit_code, 0) << halves.err;
  EXPECT_NE(halves.err.find("2 steps of 16 samples (1 rank × 8 × 2 accumulation)"),
            std::string::npos)
      << halves.err;
  nlohmann::json state = trainer_state(tmp_ / "out");
  EXPECT_EQ(state["step"], 4);
  EXPECT_EQ(state["samples_seen"], 4 * 16);
}

}  // namespace
}  // namespace bertfit::testing
