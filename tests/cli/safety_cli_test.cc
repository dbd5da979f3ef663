// Nothing a user has is lost or mixed, through the binary: an output folder holding a model or a
// run is refused unless --overwrite-output-dir, which replaces it as a whole; the output is
// never the input model; non-finite hyperparameters are refused and a run whose loss turns
// non-finite stops naming the step and writes no model; a finished run resumed changes
// nothing; a resumed run's summary agrees with metrics.jsonl; a resume with another --model or
// a broken checkpoint fails and leaves no folder; Ctrl-C stops at a step boundary with a
// checkpoint to resume from, exit 130 and no temporary folders.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli_util.h"

namespace bertfit::testing {
namespace {

namespace fs = std::filesystem;

nlohmann::json last_json(const std::string& text) {
  auto end = text.find_last_not_of('\n');
  auto begin = text.rfind('\n', end);
  return nlohmann::json::parse(text.substr(begin == std::string::npos ? 0 : begin + 1));
}

class SafetyCli : public ::testing::Test {
 protected:
  void SetUp() override {
    init_tiny_model(tmp_ / "model", "distilbert", 1);
    std::string tsv = "text\tscore\n";
    for (int i = 0; i < 64; ++i)
      tsv += "row " + std::to_string(i) + "\t" + std::to_string(i % 5) + ".5\n";
    write_text(tmp_ / "d.tsv", tsv);
  }
  std::string data() const {
    return " --train-file " + (tmp_ / "d.tsv") +
           " --text-a-column text --label-column score --batch-size 8 --threads 1";
  }
  RunResult train(const std::string& out, const std::string& extra) {
    return run_bertfit("train --model " + (tmp_ / "model") + " --output " + (tmp_ / out) + data() +
                       " " + extra);
  }
  TempDir tmp_;
};

void expect_error(const RunResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

TEST_F(SafetyCli, OccupiedOutputIsRefusedAndOverwriteReplacesItWhole) {
  ASSERT_EQ(train("ft", "--max-steps 4").exit_code, 0);
  const std::string model_before = read_text(tmp_ / "ft/model.safetensors");
  expect_error(train("ft", "--max-steps 2"), "--overwrite-output-dir");
  EXPECT_EQ(read_text(tmp_ / "ft/model.safetensors"), model_before);
  // The output may never be the input model, with or without the flag.
  RunResult same = run_bertfit("train --model " + (tmp_ / "ft") + " --output " + (tmp_ / "ft/") +
                               data() + " --max-steps 1 --overwrite-output-dir");
  expect_error(same, "is the input model");
  // init over a trained folder: refused, then replaced as a whole (no old checkpoint/metrics).
  const std::string init =
      "init --arch distilbert --set n_layers=1 --set dim=16 "
      "--set hidden_dim=32 --set n_heads=2 --output " +
      (tmp_ / "ft");
  expect_error(run_bertfit(init), "--overwrite-output-dir");
  RunResult r = run_bertfit(init + " --overwrite-output-dir");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(tmp_ / "ft/model.safetensors"));
  EXPECT_FALSE(fs::exists(tmp_ / "ft/checkpoint"));
  EXPECT_FALSE(fs::exists(tmp_ / "ft/metrics.jsonl"));
  EXPECT_FALSE(fs::exists(tmp_ / "ft.partial"));
  // train --overwrite-output-dir: one run's files only (3 step records + the final one).
  r = train("ft", "--max-steps 3 --log-every 1 --overwrite-output-dir");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string metrics = read_text(tmp_ / "ft/metrics.jsonl");
  EXPECT_EQ(std::count(metrics.begin(), metrics.end(), '\n'), 4) << metrics;
  EXPECT_TRUE(fs::exists(tmp_ / "ft/checkpoint/trainer_state.json"));
  EXPECT_FALSE(fs::exists(tmp_ / "ft.partial"));
  EXPECT_FALSE(fs::exists(tmp_ / "ft.old"));
}

TEST_F(SafetyCli, NonFiniteValuesStopTheRun) {
  for (const char* bad : {"--lr nan", "--lr inf", "--epochs nan", "--weight-decay -inf",
                          "--max-grad-norm nan", "--warmup-ratio nan"}) {
    RunResult r = train("out", std::string("--max-steps 2 ") + bad);
    expect_error(r, std::string(bad).substr(0, std::string(bad).find(' ')));
    EXPECT_NE(r.err.find("finite"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(tmp_ / "out")) << bad;
  }
  // A huge learning rate makes the loss non-finite within a few steps: the run stops naming
  // the step, keeps the last good checkpoint and writes no model.
  RunResult r = train("out", "--max-steps 40 --lr 1e8 --save-every 1");
  expect_error(r, "step ");
  EXPECT_NE(r.err.find("no model was written"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp_ / "out/model.safetensors"));
  if (fs::exists(tmp_ / "out/checkpoint")) {
    auto state = nlohmann::json::parse(read_text(tmp_ / "out/checkpoint/trainer_state.json"));
    EXPECT_NE(r.err.find("step " + std::to_string(state["step"].get<int>()) + ")"),
              std::string::npos)
        << r.err;
  }
}

TEST_F(SafetyCli, FinishedRunStaysAsItIsAndBadResumesLeaveNothing) {
  ASSERT_EQ(train("run", "--max-steps 6 --save-every 2 --log-every 1").exit_code, 0);
  // Resume the finished run: nothing changes.
  const std::string metrics = read_text(tmp_ / "run/metrics.jsonl");
  const std::string weights = read_text(tmp_ / "run/model.safetensors");
  RunResult again = train(
      "run", "--max-steps 6 --save-every 2 --log-every 1 --resume " + (tmp_ / "run/checkpoint"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("already finished"), std::string::npos) << again.err;
  EXPECT_EQ(last_json(again.out)["already_finished"], true);
  EXPECT_EQ(read_text(tmp_ / "run/metrics.jsonl"), metrics);
  EXPECT_EQ(read_text(tmp_ / "run/model.safetensors"), weights);
  // Another --model on resume is refused like any changed option.
  init_tiny_model(tmp_ / "other", "distilbert", 1);
  RunResult other =
      run_bertfit("train --model " + (tmp_ / "other") + " --output " + (tmp_ / "new") + data() +
                  " --max-steps 6 --save-every 2" + " --resume " + (tmp_ / "run/checkpoint"));
  expect_error(other, "--model");
  EXPECT_FALSE(fs::exists(tmp_ / "new"));
  // A broken checkpoint fails the start and leaves no folder behind.
  fs::copy(tmp_ / "run/checkpoint", tmp_ / "broken", fs::copy_options::recursive);
  fs::resize_file(tmp_ / "broken/optimizer.safetensors", 100);
  RunResult broken = train("new", "--max-steps 6 --save-every 2 --resume " + (tmp_ / "broken"));
  expect_error(broken, "optimizer.safetensors");
  EXPECT_FALSE(fs::exists(tmp_ / "new"));
}

TEST_F(SafetyCli, CtrlCStopsAtAStepBoundaryWithACheckpointToResume) {
  const std::string cmd = "exec " + bertfit_binary() + " train --model " + (tmp_ / "model") +
                          " --output " + (tmp_ / "run") + data() +
                          " --max-steps 2000 --log-every 1 --save-every 500 >" +
                          (tmp_ / "out.txt") + " 2>" + (tmp_ / "err.txt");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Interrupt once a few steps are logged.
  bool sent = false;
  for (int i = 0; i < 6000 && !sent; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const std::string m = read_text(tmp_ / "run/metrics.jsonl");
    if (std::count(m.begin(), m.end(), '\n') >= 3) sent = kill(pid, SIGINT) == 0;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(sent);
  ASSERT_TRUE(WIFEXITED(status)) << "died of a signal instead of stopping";
  EXPECT_EQ(WEXITSTATUS(status), 130);
  const std::string err = read_text(tmp_ / "err.txt");
  EXPECT_NE(err.find("interrupted at step"), std::string::npos) << err;
  EXPECT_NE(err.find("--resume " + (tmp_ / "run/checkpoint")), std::string::npos) << err;
  for (const char* leftover : {"run/checkpoint.tmp", "run/checkpoint.old", "run.partial"})
    EXPECT_FALSE(fs::exists(tmp_ / leftover)) << leftover;
  EXPECT_FALSE(fs::exists(tmp_ / "run/model.safetensors"));
  auto state = nlohmann::json::parse(read_text(tmp_ / "run/checkpoint/trainer_state.json"));
  // The checkpoint is the last logged step's.
  auto logged = last_json(read_text(tmp_ / "run/metrics.jsonl"));
  EXPECT_EQ(state["step"], logged["step"]);
  // Resumed with the same command, it runs to the end; its summary counts the run's steps, as
  // metrics.jsonl does.
  RunResult resumed = train("run", "--max-steps 2000 --log-every 1 --save-every 500 --resume " +
                                       (tmp_ / "run/checkpoint"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(last_json(resumed.out)["steps"], 2000);
  EXPECT_EQ(last_json(read_text(tmp_ / "run/metrics.jsonl"))["steps"], 2000);
  EXPECT_TRUE(fs::exists(tmp_ / "run/model.safetensors"));
}

}  // namespace
}  // namespace bertfit::testing
