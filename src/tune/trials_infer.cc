// Inference trials (trials.h): the layout's instances of `bench infer`, each pinned to its own
// cores, hold after warm-up until every one is ready (bench's --start-file), so that their timed
// windows overlap as a real deployment's would; throughput is the instances' sum.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/timer.h"
#include "comm/topology.h"
#include "tune/trial_process.h"
#include "tune/trials.h"

namespace bertfit::tune {
namespace {

class InferRunner : public TrialRunner {
 public:
  explicit InferRunner(const TrialConfig& c) : c_(c) {}

  TrialResult run(const Setting& s, const std::function<bool()>& stop) override {
    const Launch launch = launch_of(s, c_.context);
    const int n = std::max(1, launch.processes);
    const std::string base = c_.work_dir + "/infer-" + std::to_string(++count_);
    const std::string start = base + ".start";
    std::filesystem::remove(start);
    const std::vector<int> allowed = allowed_cores();
    const double quota = cpu_quota_cores();
    std::vector<std::unique_ptr<Child>> children;
    for (int i = 0; i < n; ++i) {
      ChildSpec spec;
      spec.argv = {c_.binary,
                   "bench",
                   "infer",
                   "--model",
                   c_.model,
                   "--seq-len",
                   std::to_string(c_.seq_len),
                   "--warmup",
                   "1",
                   "--steps",
                   "3",
                   "--seconds",
                   std::to_string(c_.measure_s),
                   "--no-peak"};
      if (n > 1) spec.argv.insert(spec.argv.end(), {"--start-file", start});
      spec.argv.insert(spec.argv.end(), launch.flags.begin(), launch.flags.end());
      spec.argv.insert(spec.argv.end(), c_.extra.begin(), c_.extra.end());
      spec.env = launch.env;
      if (n > 1) spec.cores = cpu_share_of(allowed, quota, i, n).cores;
      spec.stdout_path = base + "." + std::to_string(i) + ".out";
      spec.stderr_path = base + "." + std::to_string(i) + ".err";
      children.push_back(std::make_unique<Child>(spec));
    }
    const Timer clock;
    auto left = [&] { return std::max(0.0, c_.timeout_s - clock.seconds()); };
    TrialResult r;
    if (n > 1) {
      for (auto& child : children) {
        const bool ready = child->wait_for_stderr(
            [](const std::string& err) { return err.find("bench: ready") != std::string::npos; },
            left(), stop);
        if (!ready) return end(children, stop, clock, r);
      }
      write_start(start);
    }
    for (auto& child : children) {
      if (child->wait(left(), stop) != Child::End::kExited) return end(children, stop, clock, r);
    }
    double sum_rate = 0, sum_ms = 0, rss = 0;
    nlohmann::json per = nlohmann::json::array();
    for (auto& child : children) {
      if (child->exit_code() != 0) {
        r.note = last_line(child->err());
        if (r.note.empty()) r.note = "exit code " + std::to_string(child->exit_code());
        return r;
      }
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(child->out());
      } catch (const nlohmann::json::exception&) {
        r.note = "bench printed no JSON";
        return r;
      }
      sum_rate += j["mean_samples_per_s"].get<double>();
      sum_ms += j["ms_per_step"].get<double>();
      rss += j["peak_rss_mb"].get<double>();
      per.push_back(
          {{"samples_per_s", j["mean_samples_per_s"]}, {"ms_per_step", j["ms_per_step"]}});
    }
    r.status = TrialResult::Status::kOk;
    r.value = c_.objective.name == "latency-p50" ? sum_ms / n : sum_rate;
    r.metrics = {{"samples_per_s", sum_rate},
                 {"ms_per_step", sum_ms / n},
                 {"rss_mb", rss},
                 {"instances", per}};
    for (int i = 0; i < n; ++i) {
      std::filesystem::remove(base + "." + std::to_string(i) + ".out");
      std::filesystem::remove(base + "." + std::to_string(i) + ".err");
    }
    std::filesystem::remove(start);
    return r;
  }

 private:
  static void write_start(const std::string& path) {
    const int fd = creat(path.c_str(), 0644);
    if (fd < 0) throw_error("cannot write ", path);
    close(fd);
  }

  // A run that did not finish: interrupted or out of time; every instance is killed.
  TrialResult& end(std::vector<std::unique_ptr<Child>>& children, const std::function<bool()>& stop,
                   const Timer& clock, TrialResult& r) {
    for (auto& child : children) {
      if (!child->running() && child->exit_code() != 0 && r.note.empty()) {
        r.note = last_line(child->err());
      }
      child->kill_group();
    }
    if (stop && stop()) {
      r.status = TrialResult::Status::kInterrupted;
    } else if (r.note.empty()) {
      r.status = TrialResult::Status::kTimeout;
      r.note = "timeout after " + std::to_string(static_cast<int>(clock.seconds())) + " s";
    }
    return r;
  }

  TrialConfig c_;
  int count_ = 0;
};

}  // namespace

std::unique_ptr<TrialRunner> make_infer_runner(const TrialConfig& config) {
  return std::make_unique<InferRunner>(config);
}

std::string self_binary() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw_error("cannot find this binary (/proc/self/exe): ", ec.message());
  return p.string();
}

}  // namespace bertfit::tune
