// `bertfit train` / `eval` / `predict` end to end on real GLUE files with tiny models: a run
// completes and its saved model reproduces its final dev metrics; a run killed mid-training
// and resumed ends with exactly the parameters of an uninterrupted run; user errors give one
// clear line, a non-zero exit, and no output.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "io/safetensors.h"

namespace bertfit::testing {
namespace {

namespace fs = std::filesystem;

std::string mrpc() { return shared_dir() + "/data/glue/MRPC"; }

// The last JSON line of stdout.
nlohmann::json last_json(const std::string& out) {
  auto end = out.find_last_not_of('\n');
  auto begin = out.rfind('\n', end);
  return nlohmann::json::parse(out.substr(begin == std::string::npos ? 0 : begin + 1));
}

TEST(TrainCli, MrpcRunsEndToEndAndEvalReproducesDevMetrics) {
  TempDir tmp;
  init_tiny_model(tmp / "model");
  RunResult r = run_bertfit(
      "train --model " + (tmp / "model") + " --output " + (tmp / "out") + " --task mrpc --data " +
      mrpc() + " --max-steps 12 --batch-size 16 --lr 1e-3 --max-seq-len 64 --log-every 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json summary = last_json(r.out);
  ASSERT_TRUE(summary.contains("eval_accuracy")) << r.out;
  for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "metrics.jsonl",
                        "checkpoint/trainer_state.json", "checkpoint/optimizer.safetensors"}) {
    EXPECT_TRUE(fs::exists(tmp / (std::string("out/") + f))) << f;
  }
  // metrics.jsonl: 3 step records (every 4 steps), 1 evaluation, 1 final record.
  std::string metrics = read_text(tmp / "out/metrics.jsonl");
  int lines = 0, evals = 0, steps = 0;
  double last_phases = 0;
  for (std::size_t p = 0, q; (q = metrics.find('\n', p)) != std::string::npos; p = q + 1) {
    auto j = nlohmann::json::parse(metrics.substr(p, q - p));
    ++lines;
    evals += j.contains("eval_accuracy") && !j.contains("final");
    if (j.contains("step_seconds")) {
      // Phase times are cumulative since the first step: positive and growing.
      ++steps;
      const double phases = j["forward_s"].get<double>() + j["backward_s"].get<double>() +
                            j["update_s"].get<double>();
      EXPECT_GT(j["forward_s"].get<double>(), 0.0);
      EXPECT_GT(j["backward_s"].get<double>(), 0.0);
      EXPECT_GT(j["update_s"].get<double>(), 0.0);
      EXPECT_GT(phases, last_phases);
      last_phases = phases;
    }
  }
  EXPECT_EQ(lines, 5);
  EXPECT_EQ(evals, 1);
  EXPECT_EQ(steps, 3);

  // The model written to --output gives the same dev metrics when evaluated on its own.
  RunResult e = run_bertfit("eval --model " + (tmp / "out") + " --task mrpc --data " + mrpc() +
                            " --max-seq-len 64");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  nlohmann::json ev = last_json(e.out);
  EXPECT_EQ(ev["eval_accuracy"], summary["eval_accuracy"]);
  EXPECT_EQ(ev["eval_f1"], summary["eval_f1"]);
  EXPECT_EQ(ev["examples"], 408);

  // predict writes one JSON line per row with a label and probabilities summing to 1.
  RunResult p =
      run_bertfit("predict --model " + (tmp / "out") + " --input " + mrpc() +
                  "/dev.tsv --text-a-column 3 --text-b-column 4 --output " + (tmp / "pred.jsonl"));
  ASSERT_EQ(p.exit_code, 0) << p.err;
  std::string pred = read_text(tmp / "pred.jsonl");
  EXPECT_EQ(std::count(pred.begin(), pred.end(), '\n'), 408);
  auto first = nlohmann::json::parse(pred.substr(0, pred.find('\n')));
  EXPECT_NEAR(first["probabilities"][0].get<double>() + first["probabilities"][1].get<double>(),
              1.0, 1e-9);
}

// Kills a training run with SIGKILL once it has written a checkpoint, resumes it, and compares
// the final parameters with an uninterrupted run: they must be identical (dropout and shuffling
// on), because the data order and every dropout mask are functions of (seed, step) and the
// checkpoint holds the parameters, Adam's moments and the step.
TEST(TrainCli, KilledRunResumesToTheSameParameters) {
  TempDir tmp;
  init_tiny_model(tmp / "model");
  const std::string common = " --task mrpc --data " + mrpc() +
                             " --max-steps 24 --batch-size 8 --lr 1e-3 --max-seq-len 48"
                             " --save-every 4 --eval-every never --threads 2";
  RunResult full =
      run_bertfit("train --model " + (tmp / "model") + " --output " + (tmp / "full") + common);
  ASSERT_EQ(full.exit_code, 0) << full.err;

  std::string cmd = "exec " + bertfit_binary() + " train --model " + (tmp / "model") +
                    " --output " + (tmp / "killed") + common + " >/dev/null 2>&1";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait for a checkpoint at step 4..20, then kill without warning.
  const std::string state = tmp / "killed/checkpoint/trainer_state.json";
  bool killed = false;
  for (int i = 0; i < 6000 && !killed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (fs::exists(state)) {
      try {
        auto j = nlohmann::json::parse(read_text(state));
        if (j["step"].get<int>() < 24) {
          kill(pid, SIGKILL);
          killed = true;
        }
      } catch (const nlohmann::json::exception&) {
        // Being renamed into place: try again.
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(killed) << "the run finished before it could be killed";
  ASSERT_TRUE(WIFSIGNALED(status));
  int step = nlohmann::json::parse(read_text(state))["step"];
  ASSERT_LT(step, 24);

  RunResult resumed = run_bertfit("train --model " + (tmp / "model") + " --output " +
                                  (tmp / "killed") + common + " --resume " + (tmp / "killed"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("resuming"), std::string::npos) << resumed.err;
  auto want = all_params(tmp / "full/model.safetensors");
  auto got = all_params(tmp / "killed/model.safetensors");
  ASSERT_EQ(want.size(), got.size());
  std::size_t differing = 0;
  for (std::size_t i = 0; i < want.size(); ++i) differing += want[i] != got[i];
  EXPECT_EQ(differing, 0u) << "resumed at step " << step;

  // Resuming with a different trajectory-changing option is refused.
  RunResult bad = run_bertfit("train --model " + (tmp / "model") + " --output " + (tmp / "killed") +
                              common + " --lr 5e-4 --resume " + (tmp / "killed"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--lr"), std::string::npos) << bad.err;
}

// A bad invocation fails with a one-line message naming the culprit and leaves no output.
void expect_user_error(const std::string& args, const std::string& needle,
                       const std::string& output_dir) {
  RunResult r = run_bertfit(args);
  EXPECT_NE(r.exit_code, 0) << args;
  EXPECT_EQ(r.exit_code < 128, true) << "crashed: " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  if (!output_dir.empty()) {
    EXPECT_FALSE(fs::exists(output_dir)) << output_dir;
  }
}

TEST(TrainCli, UserErrorsAreClearAndLeaveNoOutput) {
  TempDir tmp;
  init_tiny_model(tmp / "model");
  const std::string model = " --model " + (tmp / "model");
  const std::string out = tmp / "out";
  // Missing data files.
  fs::create_directories(tmp / "empty_glue");
  expect_user_error(
      "train" + model + " --output " + out + " --task mrpc --data " + (tmp / "empty_glue"),
      "train.tsv", out);
  // A label outside the task's label set.
  fs::create_directories(tmp / "badlabel");
  write_text(tmp / "badlabel/train.tsv",
             "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta b\tc d\n7\t3\t4\te f\tg h\n");
  expect_user_error(
      "train" + model + " --output " + out + " --task mrpc --data " + (tmp / "badlabel"),
      "train.tsv:3", out);
  // --max-seq-len beyond max_position_embeddings.
  expect_user_error("train" + model + " --output " + out + " --task mrpc --data " + mrpc() +
                        " --max-seq-len 1000",
                    "max_position_embeddings", out);
  // A model folder whose tensors do not fit its config.
  fs::copy(tmp / "model", tmp / "badmodel");
  std::string config = read_text(tmp / "model/config.json");
  auto j = nlohmann::json::parse(config);
  j["dim"] = 48;
  j["hidden_dim"] = 96;
  write_text(tmp / "badmodel/config.json", j.dump());
  expect_user_error(
      "train --model " + (tmp / "badmodel") + " --output " + out + " --task mrpc --data " + mrpc(),
      "model.safetensors", out);
  // An output folder that is a file.
  write_text(tmp / "afile", "x");
  expect_user_error("train" + model + " --output " + (tmp / "afile") + " --task mrpc --data " +
                        mrpc() + " --max-steps 1",
                    "afile", "");
  EXPECT_EQ(read_text(tmp / "afile"), "x");
  // A task whose label count does not match the model's trained classifier.
  expect_user_error("train" + model + " --output " + out + " --task stsb --data " + shared_dir() +
                        "/data/glue/STS-B",
                    "--ignore-mismatched-sizes", out);
  // Bad option values.
  expect_user_error(
      "train" + model + " --output " + out + " --task mrpc --data " + mrpc() + " --batch-size 0",
      "--batch-size", out);
  expect_user_error("train" + model + " --output " + out + " --task mrpc --data " + mrpc() +
                        " --eval-every sometimes",
                    "--eval-every", out);
}

TEST(TrainCli, VersionAndDefaultVocabularyFromAnyFolder) {
  RunResult v = run_bertfit("--version");
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.out.rfind("bertfit ", 0), 0u) << v.out;
  // init without --vocab finds shared/data/vocab above the binary, whatever the working folder
  // (no build path is compiled in).
  TempDir tmp;
  const std::string cmd = "cd " + tmp.path() + " && " + bertfit_binary() +
                          " init --arch bert --output m --set num_hidden_layers=1 "
                          "--set hidden_size=8 --set intermediate_size=8 "
                          "--set num_attention_heads=2 >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(read_text(tmp / "m/vocab.txt"),
            read_text(shared_dir() + "/data/vocab/bert-base-uncased.txt"));
}

}  // namespace
}  // namespace bertfit::testing
