// The best checkpoint and early stopping through the binary (issue 30, item 3): on MRPC runs
// whose best evaluation is not the last, --load-best-model-at-end saves the best evaluation's
// model (its parameters are OUTPUT/best's and `eval` reproduces the best record's metrics), the
// final record and the summary name the best step; --metric-for-best-model and
// --greater-is-better choose it; --early-stopping-patience / -threshold stop where Trainer's
// EarlyStoppingCallback would, computed here from the run's own evaluation records;
// --save-total-limit keeps that many checkpoints; user errors are one line.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "cli_util.h"
#include "io/safetensors.h"

namespace bertfit::testing {
namespace {

namespace fs = std::filesystem;

std::string mrpc() { return shared_dir() + "/data/glue/MRPC"; }

std::vector<nlohmann::json> records(const std::string& dir) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_text(dir + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

std::vector<nlohmann::json> evals(const std::vector<nlohmann::json>& recs) {
  std::vector<nlohmann::json> out;
  for (const auto& r : recs) {
    if (r.contains("split") && !r.contains("final")) out.push_back(r);
  }
  return out;
}

// The step of the strictly best value of `key` over the evaluations, as Trainer picks it.
std::int64_t best_of(const std::vector<nlohmann::json>& ev, const std::string& key, bool greater) {
  std::int64_t step = -1;
  double best = 0;
  for (const auto& e : ev) {
    const double v = e[key].get<double>();
    if (step < 0 || (greater ? v > best : v < best)) {
      best = v;
      step = e["step"].get<std::int64_t>();
    }
  }
  return step;
}

class BestModelCli : public ::testing::Test {
 protected:
  void SetUp() override { init_tiny_model(tmp_ / "model"); }
  // A run on MRPC evaluated every 2 steps at a learning rate high enough that the dev loss and
  // accuracy move both ways.
  RunResult train(const std::string& out, const std::string& extra) {
    return run_bertfit("train --model " + (tmp_ / "model") + " --output " + (tmp_ / out) +
                       " --task mrpc --data " + mrpc() +
                       " --batch-size 16 --lr 3e-3 --max-seq-len 64 --log-every 2 " + extra);
  }
  TempDir tmp_;
};

TEST_F(BestModelCli, LoadBestModelAtEndSavesTheBestEvaluationsModel) {
  RunResult r = train("out",
                      "--max-steps 16 --eval-every 2 --load-best-model-at-end "
                      "--metric-for-best-model accuracy");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string out = tmp_ / "out";
  const std::vector<nlohmann::json> recs = records(out);
  const std::vector<nlohmann::json> ev = evals(recs);
  ASSERT_EQ(ev.size(), 8u);
  const std::int64_t best = best_of(ev, "eval_accuracy", true);
  ASSERT_NE(best, 16) << "the test needs a run whose best evaluation is not the last";
  nlohmann::json best_rec;
  for (const auto& e : ev) {
    if (e["step"] == best) best_rec = e;
  }
  const nlohmann::json& fin = recs.back();
  ASSERT_TRUE(fin.value("final", false));
  EXPECT_EQ(fin["steps"], 16);
  EXPECT_EQ(fin["best_step"], best);
  EXPECT_EQ(fin["best_metric"], "eval_accuracy");
  EXPECT_EQ(fin["model"], "best");
  EXPECT_EQ(fin["eval_accuracy"], best_rec["eval_accuracy"]);
  EXPECT_EQ(fin["eval_f1"], best_rec["eval_f1"]);
  const nlohmann::json summary = nlohmann::json::parse(last_line(r.out));
  EXPECT_EQ(summary["best_step"], best);
  EXPECT_EQ(summary["eval_accuracy"], best_rec["eval_accuracy"]);
  EXPECT_NE(r.err.find("loading the best model (step " + std::to_string(best)), std::string::npos)
      << r.err;

  // The saved model is the best one: OUTPUT/best's parameters, not the last checkpoint's, and
  // evaluated on its own it gives the best record's metrics.
  const std::vector<float> saved = all_params(out + "/model.safetensors");
  EXPECT_EQ(saved, all_params(out + "/best/model.safetensors"));
  EXPECT_NE(saved, all_params(out + "/checkpoint/model.safetensors"));
  RunResult e =
      run_bertfit("eval --model " + out + " --task mrpc --data " + mrpc() + " --max-seq-len 64");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const nlohmann::json ej = nlohmann::json::parse(last_line(e.out));
  EXPECT_EQ(ej["eval_accuracy"], best_rec["eval_accuracy"]);
  EXPECT_EQ(ej["eval_f1"], best_rec["eval_f1"]);
}

TEST_F(BestModelCli, WithoutLoadBestTheLastModelIsSavedAndTheBestStepStillReported) {
  RunResult r = train("out", "--max-steps 16 --eval-every 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string out = tmp_ / "out";
  const std::vector<nlohmann::json> recs = records(out);
  const nlohmann::json& fin = recs.back();
  EXPECT_EQ(fin["best_step"], best_of(evals(recs), "eval_loss", false));
  EXPECT_EQ(fin["best_metric"], "eval_loss");
  EXPECT_EQ(fin["model"], "last");
  EXPECT_FALSE(fs::exists(out + "/best"));
  EXPECT_EQ(all_params(out + "/model.safetensors"),
            all_params(out + "/checkpoint/model.safetensors"));
}

// --greater-is-better reverses the default direction (here: the highest loss is "best").
TEST_F(BestModelCli, GreaterIsBetterReversesTheDirection) {
  RunResult r = train("out",
                      "--max-steps 16 --eval-every 2 --load-best-model-at-end "
                      "--metric-for-best-model eval_loss --greater-is-better true");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<nlohmann::json> recs = records(tmp_ / "out");
  const std::vector<nlohmann::json> ev = evals(recs);
  EXPECT_EQ(recs.back()["best_step"], best_of(ev, "eval_loss", true));
  EXPECT_NE(best_of(ev, "eval_loss", false), best_of(ev, "eval_loss", true))
      << "the run must tell the two directions apart";
}

// Trainer's EarlyStoppingCallback replayed on the run's own evaluations: the step at which it
// stops, or -1.
std::int64_t early_stop_step(const std::vector<nlohmann::json>& ev, const std::string& key,
                             int patience, double threshold) {
  bool have = false;
  double best = 0;
  int stale = 0;
  for (const auto& e : ev) {
    const double v = e[key].get<double>();
    if (!have || (v < best && std::abs(v - best) > threshold)) {
      stale = 0;
    } else {
      ++stale;
    }
    if (!have || v < best) best = v;
    have = true;
    if (stale >= patience) return e["step"].get<std::int64_t>();
  }
  return -1;
}

TEST_F(BestModelCli, EarlyStoppingStopsWhereTrainersCallbackWould) {
  RunResult r = train("out",
                      "--max-steps 60 --eval-every 2 --load-best-model-at-end "
                      "--early-stopping-patience 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string out = tmp_ / "out";
  const std::vector<nlohmann::json> recs = records(out);
  const std::vector<nlohmann::json> ev = evals(recs);
  const std::int64_t stop = ev.back()["step"].get<std::int64_t>();
  ASSERT_LT(stop, 60) << "the run did not stop early";
  EXPECT_EQ(early_stop_step(ev, "eval_loss", 2, 0.0), stop);
  const nlohmann::json& fin = recs.back();
  EXPECT_EQ(fin["steps"], stop);
  EXPECT_EQ(fin["stopped_early"], true);
  EXPECT_EQ(fin["best_step"], best_of(ev, "eval_loss", false));
  const nlohmann::json summary = nlohmann::json::parse(last_line(r.out));
  EXPECT_EQ(summary["steps"], stop);
  EXPECT_EQ(summary["stopped_early"], true);
  EXPECT_EQ(all_params(out + "/model.safetensors"), all_params(out + "/best/model.safetensors"));

  // Resuming an early-stopped run has nothing to do.
  RunResult again = train("out",
                          "--max-steps 60 --eval-every 2 --load-best-model-at-end "
                          "--early-stopping-patience 2 --resume " +
                              out + "/checkpoint");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(last_line(again.out))["already_finished"], true) << again.out;
  EXPECT_NE(again.err.find("stopped early"), std::string::npos) << again.err;
}

// A threshold larger than any change of the loss: no evaluation after the first improves, so the
// run stops at the third evaluation (patience 2).
TEST_F(BestModelCli, EarlyStoppingThresholdDemandsALargerGain) {
  RunResult r = train("out",
                      "--max-steps 60 --eval-every 2 --load-best-model-at-end "
                      "--early-stopping-patience 2 --early-stopping-threshold 100");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<nlohmann::json> recs = records(tmp_ / "out");
  EXPECT_EQ(evals(recs).size(), 3u);
  EXPECT_EQ(recs.back()["steps"], 6);
}

TEST_F(BestModelCli, SaveTotalLimitKeepsThatManyCheckpoints) {
  RunResult r = train("out",
                      "--max-steps 8 --eval-every never --save-every 2 "
                      "--save-total-limit 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> kept;
  for (const auto& e : fs::directory_iterator(tmp_ / "out")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("checkpoint", 0) == 0) kept.push_back(name);
  }
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept, (std::vector<std::string>{"checkpoint", "checkpoint-4", "checkpoint-6"}));
  // An older checkpoint resumes like any other.
  RunResult resumed = train("out",
                            "--max-steps 8 --eval-every never --save-every 2 "
                            "--save-total-limit 3 --resume " +
                                (tmp_ / "out/checkpoint-4"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("at step 4"), std::string::npos) << resumed.err;
}

TEST_F(BestModelCli, UserErrorsAreOneLineNamingTheFlag) {
  struct Case {
    std::string flags, message;
  };
  const std::vector<Case> cases = {
      {"--early-stopping-patience 2", "--early-stopping-patience needs --load-best-model-at-end"},
      {"--load-best-model-at-end --metric-for-best-model pearson",
       "--metric-for-best-model pearson: the evaluation reports no such metric; it reports loss, "
       "accuracy, f1, combined_score"},
      {"--greater-is-better maybe", "--greater-is-better"},
      {"--load-best-model-at-end --eval-every never", "--eval-every is never"},
      {"--save-total-limit -1", "--save-total-limit must be >= 0"},
      {"--early-stopping-threshold -1", "--early-stopping-threshold must be >= 0"},
      {"--early-stopping-patience -1", "--early-stopping-patience must be >= 0"},
  };
  for (const Case& c : cases) {
    RunResult r = train("bad", "--max-steps 2 " + c.flags);
    EXPECT_NE(r.exit_code, 0) << c.flags;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.flags << "\n" << r.err;
    // One error line (truncation warnings about the data may come before it).
    std::istringstream lines(r.err);
    int errors = 0, others = 0;
    for (std::string line; std::getline(lines, line);) {
      errors += line.rfind("bertfit: error: ", 0) == 0;
      others += line.rfind("bertfit: error: ", 0) != 0 && line.rfind("warning: ", 0) != 0;
    }
    EXPECT_EQ(errors, 1) << c.flags << "\n" << r.err;
    EXPECT_EQ(others, 0) << c.flags << "\n" << r.err;
    EXPECT_FALSE(fs::exists(tmp_ / "bad")) << c.flags;
  }
  // Custom data without a dev file has nothing to choose the best model on.
  write_text(tmp_ / "train.csv", "text,label\na good film,pos\na bad film,neg\n");
  RunResult r = run_bertfit("train --model " + (tmp_ / "model") + " --output " + (tmp_ / "bad") +
                            " --train-file " + (tmp_ / "train.csv") +
                            " --text-a-column text --label-column label --max-steps 1 "
                            "--load-best-model-at-end");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--load-best-model-at-end needs a dev set"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp_ / "bad"));
}

}  // namespace
}  // namespace bertfit::testing
