// Training trials (trials.h): `train --max-steps` with the user's data and head flags, under
// mpirun for several ranks (each rank pins itself to its share, run_setup.cc); the value is the
// global batch over the median time of the steps after the warm-up ones, read back from
// metrics.jsonl (--log-every 1). The knobs' environment reaches the ranks through mpirun's -x,
// never mpirun itself (a preloaded allocator in mpirun would measure nothing).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/timer.h"
#include "tune/trial_process.h"
#include "tune/trials.h"

namespace bertfit::tune {
namespace {

class TrainRunner : public TrialRunner {
 public:
  explicit TrainRunner(const TrialConfig& c) : c_(c) {}

  TrialResult run(const Setting& s, const std::function<bool()>& stop) override {
    const Launch launch = launch_of(s, c_.context);
    const std::string out = c_.work_dir + "/train-" + std::to_string(++count_);
    std::filesystem::remove_all(out);
    ChildSpec spec;
    if (launch.processes > 1) {
      spec.argv = {
          "/usr/bin/env", "mpirun",         "-np", std::to_string(launch.processes), "--bind-to",
          "none",         "--oversubscribe"};
      if (geteuid() == 0) spec.argv.push_back("--allow-run-as-root");
      // Loopback TCP only: one machine, and no transport this container may lack.
      spec.argv.insert(spec.argv.end(), {"--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include",
                                         "lo", "--mca", "oob_tcp_if_include", "lo"});
      for (const auto& [name, value] : launch.env) {
        spec.argv.insert(spec.argv.end(), {"-x", name + "=" + value});
      }
    } else {
      spec.env = launch.env;
    }
    const int steps = c_.warmup_steps + c_.timed_steps;
    spec.argv.insert(spec.argv.end(),
                     {c_.binary, "train", "--model", c_.model, "--output", out, "--max-steps",
                      std::to_string(steps), "--log-every", "1", "--eval-every", "never"});
    spec.argv.insert(spec.argv.end(), launch.flags.begin(), launch.flags.end());
    spec.argv.insert(spec.argv.end(), c_.extra.begin(), c_.extra.end());
    spec.stdout_path = out + ".out";
    spec.stderr_path = out + ".err";
    Child child(spec);
    const Timer clock;
    TrialResult r;
    const Child::End end = child.wait(c_.timeout_s, stop);
    if (end != Child::End::kExited) {
      child.kill_group();
      r.status = end == Child::End::kStopped ? TrialResult::Status::kInterrupted
                                             : TrialResult::Status::kTimeout;
      if (end == Child::End::kTimeout) {
        r.note = "timeout after " + std::to_string(static_cast<int>(clock.seconds())) + " s";
      }
      return r;
    }
    if (child.exit_code() != 0) {
      r.note = last_line(child.err());
      if (r.note.empty()) r.note = "exit code " + std::to_string(child.exit_code());
      return r;
    }
    std::vector<double> times;
    std::ifstream log(out + "/metrics.jsonl");
    for (std::string line; std::getline(log, line);) {
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.contains("step_seconds") || !j.contains("step")) continue;
      if (j["step"].get<int>() > c_.warmup_steps) times.push_back(j["step_seconds"].get<double>());
    }
    if (times.empty()) {
      r.note = "train logged no timed step (metrics.jsonl)";
      return r;
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    r.status = TrialResult::Status::kOk;
    r.value = c_.context.global_batch / median;
    r.metrics = {{"ms_per_step", median * 1e3},
                 {"timed_steps", times.size()},
                 {"processes", launch.processes}};
    std::filesystem::remove_all(out);
    std::filesystem::remove(out + ".out");
    std::filesystem::remove(out + ".err");
    return r;
  }

 private:
  TrialConfig c_;
  int count_ = 0;
};

}  // namespace

std::unique_ptr<TrialRunner> make_train_runner(const TrialConfig& config) {
  return std::make_unique<TrainRunner>(config);
}

}  // namespace bertfit::tune
