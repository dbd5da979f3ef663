// `bertfit tune` through the binary on a tiny model with short trials: each mode end to end
// (trials.jsonl, tuned.json that --config takes, the table and the summary), every flag, the
// grid, failures and timeouts, the budget, Ctrl-C keeping the best so far, and the one-line
// refusals. What is faster is never asserted (bench/tune_vs_grid.sh measures that); only that
// every figure comes from a run that happened.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "tune_cli_util.h"

namespace bertfit::testing {
namespace {

bool have_optuna() {
  return std::system("/usr/bin/python3 -c 'import optuna, sklearn' >/dev/null 2>&1") == 0;
}

int count_lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

// Short inference trials on the tiny model, with the space cut to what the test needs.
const char* kQuickInfer = " --measure-s 0.2 --seq-len 16 --fix batch_size=8";

TEST(TuneCli, InferWritesTheTrialsATunedFileAndASummary) {
  TempDir tmp;
  init_tiny_model(tmp / "m");
  const std::string out = tmp / "t";
  const RunResult r = run_bertfit("tune infer --model " + (tmp / "m") + kQuickInfer +
                                  " --trials 5 --sampler random --seed 3 --output " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<nlohmann::json> trials = trials_of(out);
  ASSERT_EQ(trials.size(), 5u);
  EXPECT_EQ(trials[0]["role"], "defaults");
  EXPECT_EQ(trials[0]["setting"]["layout"], "1x2");  // the defaults: every core, one process
  EXPECT_EQ(trials[0]["setting"]["wait"], "default");
  for (const nlohmann::json& t : trials) {
    EXPECT_EQ(t["status"], "ok") << t.dump();
    EXPECT_GT(t["value"].get<double>(), 0);
    EXPECT_EQ(t["setting"]["batch_size"], "8");  // held by --fix
    EXPECT_NEAR(t["value"].get<double>(), t["metrics"]["samples_per_s"].get<double>(), 1e-9);
  }
  EXPECT_EQ(trials.back()["role"], "confirm");
  // The table: a header, one row per trial, the answer.
  EXPECT_NE(r.err.find("tune infer: throughput (samples/s, higher is better), 5 trials, random"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("dropped: bind: spread"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("best: layout="), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("as a command: "), std::string::npos) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["trials"], 5);
  EXPECT_EQ(j["mode"], "infer");
  // The answer is the best mean of a measured setting, and the file holds it.
  const nlohmann::json tuned = nlohmann::json::parse(read_text(out + "/tuned.json"));
  EXPECT_EQ(tuned["settings"], j["best"]);
  EXPECT_EQ(tuned["command"], "infer");
  bool found = false;
  for (const nlohmann::json& t : trials) found = found || t["setting"] == j["best"];
  EXPECT_TRUE(found);
  if (have_optuna()) {
    EXPECT_FALSE(j["importance"].empty()) << r.err;  // fANOVA over the random runs
  }
  // --config takes it: bench runs the tuned threads and precision.
  const RunResult b =
      run_bertfit("bench infer --model " + (tmp / "m") +
                  " --seq-len 9 --steps 1 --warmup 0 --no-peak --config " + out + "/tuned.json");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const nlohmann::json bj = nlohmann::json::parse(b.out);
  const std::string layout = j["best"]["layout"];
  EXPECT_EQ(std::to_string(bj["threads"].get<int>()), layout.substr(layout.find('x') + 1));
  EXPECT_EQ(bj["precision"], j["best"]["precision"]);
  EXPECT_EQ(bj["batch_size"], 8);
}

TEST(TuneCli, CompareMeasuresTunedFilesInTurn) {
  TempDir tmp;
  init_tiny_model(tmp / "m");
  const std::string out = tmp / "t";
  const std::string fixes =
      " --fix layout=1x2 --fix wait=default --fix bind=none"
      " --fix allocator=glibc --fix precision=fp32,bf16";
  ASSERT_EQ(run_bertfit("tune infer --model " + (tmp / "m") + kQuickInfer + fixes +
                        " --sampler grid --output " + out)
                .exit_code,
            0);
  // A second file: the same tuned.json with the other precision.
  nlohmann::json other = nlohmann::json::parse(read_text(out + "/tuned.json"));
  other["settings"]["precision"] = other["settings"]["precision"] == "fp32" ? "bf16" : "fp32";
  write_text(tmp / "other.json", other.dump());
  const RunResult r =
      run_bertfit("tune infer --model " + (tmp / "m") + kQuickInfer + " --output " + out +
                  " --rounds 2 --compare " + out + "/tuned.json " + (tmp / "other.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["compare"].size(), 2u);
  for (const nlohmann::json& row : j["compare"]) {
    ASSERT_EQ(row["values"].size(), 2u) << row.dump();
    EXPECT_NEAR(row["mean"].get<double>(),
                (row["values"][0].get<double>() + row["values"][1].get<double>()) / 2, 1e-6);
  }
  EXPECT_EQ(j["compare"][1]["setting"]["precision"], other["settings"]["precision"]);
  EXPECT_NE(r.err.find("round 2  " + (tmp / "other.json")), std::string::npos) << r.err;
  // A file of another mode, and a bad --rounds, are one line.
  other["command"] = "serve";
  write_text(tmp / "serve.json", other.dump());
  for (const std::string& bad : {std::string(" --compare ") + (tmp / "serve.json"),
                                 " --rounds 0 --compare " + out + "/tuned.json"}) {
    const RunResult b = run_bertfit("tune infer --model " + (tmp / "m") + kQuickInfer + bad);
    EXPECT_EQ(b.exit_code, 1) << bad;
    EXPECT_EQ(count_lines(b.err), 1) << b.err;
  }
}

TEST(TuneCli, ServeUnderTpeMeasuresLatency) {
  if (!have_optuna()) GTEST_SKIP() << "python3-optuna is not installed";
  TempDir tmp;
  init_tiny_model(tmp / "m");
  const std::string out = tmp / "t";
  write_text(tmp / "texts.txt", "a first request\nand a second, longer request text\n");
  const RunResult r = run_bertfit(
      "tune serve --model " + (tmp / "m") + " --trials 3 --measure-s 0.3 --warmup-s 0.1" +
      " --concurrency 2 --objective latency-p99 --input " + (tmp / "texts.txt") +
      " --fix max_batch_tokens=1024 --output " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<nlohmann::json> trials = trials_of(out);
  ASSERT_EQ(trials.size(), 3u);
  for (const nlohmann::json& t : trials) {
    ASSERT_EQ(t["status"], "ok") << t.dump();
    EXPECT_EQ(t["value"], t["metrics"]["p99_ms"]);
    EXPECT_GE(t["metrics"]["p99_ms"].get<double>(), t["metrics"]["p50_ms"].get<double>());
    EXPECT_GT(t["metrics"]["requests"].get<int>(), 0);
  }
  EXPECT_NE(r.err.find(", tpe, "), std::string::npos) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["objective"], "latency-p99");
  EXPECT_EQ(j["unit"], "ms");
}

TEST(TuneCli, TheGridRunsEachCombinationOnceAndShowSpaceCountsThem) {
  TempDir tmp;
  init_tiny_model(tmp / "m");
  const std::string fixes =
      " --fix layout=1x1,1x2 --fix wait=passive,active --fix bind=none --fix allocator=glibc"
      " --fix precision=fp32";
  const RunResult space = run_bertfit("tune infer --show-space" + std::string(kQuickInfer) + fixes);
  ASSERT_EQ(space.exit_code, 0) << space.err;
  const nlohmann::json s = nlohmann::json::parse(space.out);
  EXPECT_EQ(s["combinations"], 4);
  EXPECT_EQ(s["knobs"]["wait"], (nlohmann::json{"passive", "active"}));
  EXPECT_EQ(s["held"]["precision"], "fp32");
  const std::string out = tmp / "t";
  const RunResult r = run_bertfit("tune infer --model " + (tmp / "m") + kQuickInfer + fixes +
                                  " --sampler grid --output " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<nlohmann::json> trials = trials_of(out);
  ASSERT_EQ(trials.size(), 4u);
  std::set<std::string> keys;
  for (const nlohmann::json& t : trials) keys.insert(t["key"].get<std::string>());
  EXPECT_EQ(keys.size(), 4u);
  // The full space of this machine without --fix: more than the grid above.
  const RunResult all = run_bertfit("tune serve --show-space");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_GT(nlohmann::json::parse(all.out)["combinations"].get<long>(), 100);
}

TEST(TuneCli, FailuresAndTimeoutsAreRecordedAndAllFailingIsOneLine) {
  TempDir tmp;
  init_tiny_model(tmp / "m");
  const std::string out = tmp / "t";
  const RunResult r =
      run_bertfit("tune infer --model " + (tmp / "m") + kQuickInfer +
                  " --trials 2 --sampler random --trial-timeout 0.05 --output " + out);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("bertfit: error: every trial failed (2 in " + out +
                       "/trials.jsonl); the first: timeout after"),
            std::string::npos)
      << r.err;
  for (const nlohmann::json& t : trials_of(out)) EXPECT_EQ(t["status"], "timeout");
  // A trial's own error is its note: a model the command cannot run (a folder without weights).
  std::filesystem::create_directories(tmp / "empty");
  write_text(tmp / "empty/config.json", "{\"model_type\": \"bert\"}");
  const RunResult f =
      run_bertfit("tune infer --model " + (tmp / "empty") + kQuickInfer +
                  " --trials 1 --sampler random --overwrite-output-dir --output " + out);
  EXPECT_EQ(f.exit_code, 1);
  EXPECT_NE(f.err.find("every trial failed (1 in"), std::string::npos) << f.err;
  const std::vector<nlohmann::json> t = trials_of(out);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0]["status"], "failed");
  EXPECT_NE(t[0]["note"].get<std::string>().find("bertfit: error:"), std::string::npos)
      << t[0].dump();
}

TEST(TuneCli, TheBudgetStopsTheSearch) {
  TempDir tmp;
  init_tiny_model(tmp / "m");
  const RunResult r =
      run_bertfit("tune infer --model " + (tmp / "m") + kQuickInfer +
                  " --trials 40 --sampler random --budget-s 0.1 --output " + (tmp / "t"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["budget_hit"], true);
  EXPECT_EQ(j["trials"], 1);  // the defaults ran; the next would have ended past the budget
}

TEST(TuneCli, RefusalsAreOneLine) {
  TempDir tmp;
  init_tiny_model(tmp / "m");
  const std::string m = " --model " + (tmp / "m") + " --output " + (tmp / "t");
  for (const auto& [args, expected] : std::vector<std::pair<std::string, std::string>>{
           {"tune infer" + m + " --objective latency-p99",
            "--objective latency-p99: tune infer measures throughput (samples-per-s) or "
            "latency-p50"},
           {"tune serve" + m + " --fix wiat=active", "--fix wiat=active: unknown knob 'wiat'"},
           {"tune serve" + m + " --fix precision=fp16",
            "--fix precision=fp16: 'fp16' is not one of"},
           {"tune infer" + m + " --task mrpc",
            "unknown flag --task for tune infer (only tune train passes flags on, to train)"},
           {"tune train" + m + " --batch-size x", "--batch-size x: give a positive number"},
           {"tune infer --trials 2", "--model is required (unless --show-space)"},
           {"tune infer" + m + " --trials -1", "--trials -1: give at least 1"},
           {"tune serve" + m + " --concurrency 0", "--concurrency 0: give 1 to 256"},
           {"tune serve" + m + " --input " + (tmp / "none.txt"), "--input " + (tmp / "none.txt")},
       }) {
    const RunResult r = run_bertfit(args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(count_lines(r.err), 1) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << args << "\n" << r.err;
  }
  // An earlier tune's files are kept unless --overwrite-output-dir.
  std::filesystem::create_directories(tmp / "t");
  write_text(tmp / "t/tuned.json", "{}");
  const RunResult r = run_bertfit("tune infer" + m + " --trials 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("holds tuned.json of an earlier tune; pass --overwrite-output-dir"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(read_text(tmp / "t/tuned.json"), "{}");
}

// Ctrl-C: the running trial is killed with its group, the trials so far stay, the best so far
// is written and printed, and tune exits 130.
TEST(TuneCli, CtrlCKeepsTheTrialsAndTheBestSoFar) {
  TempDir tmp;
  init_tiny_model(tmp / "m");
  const std::string out = tmp / "t";
  const std::string err_path = tmp / "err.txt";
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string bin = bertfit_binary();
    const std::string model = tmp / "m";
    const int fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    execl(bin.c_str(), bin.c_str(), "tune", "infer", "--model", model.c_str(), "--measure-s", "0.5",
          "--seq-len", "16", "--fix", "layout=2x1", "--trials", "30", "--sampler", "random",
          "--output", out.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  // Interrupt once two trials are recorded (each runs two instances of bench).
  for (int i = 0; i < 600 && trials_of(out).size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GE(trials_of(out).size(), 2u);
  kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  const std::string err = read_text(err_path);
  EXPECT_NE(err.find("bertfit: stopped: stopped after"), std::string::npos) << err;
  EXPECT_NE(err.find("best: "), std::string::npos) << err;
  EXPECT_TRUE(std::filesystem::exists(out + "/tuned.json"));
  const std::vector<nlohmann::json> trials = trials_of(out);
  EXPECT_LT(trials.size(), 30u);
  // No trial process is left: each instance's --start-file names the output folder.
  std::string left;
  // ("[t]rials" matches "trials" but not the pattern itself in pgrep's own shell.)
  if (FILE* p = popen(("pgrep -f -- '" + out + "/[t]rials/'").c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof(buf), p)) left += buf;
    pclose(p);
  }
  EXPECT_EQ(left, "");
}

}  // namespace
}  // namespace bertfit::testing
