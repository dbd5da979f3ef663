// Serving trials (trials.h): `serve --port 0` with the setting's flags and environment, its
// port read from its `serve: listening on` line, then a closed loop of --concurrency connections
// from this process (serve/load_client.h: HTTP stays in serve/). Every answer must be a 2xx: a
// refused or failed request fails the trial, since a setting that drops requests is no answer.
#include <signal.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "base/timer.h"
#include "serve/load_client.h"
#include "tune/trial_process.h"
#include "tune/trials.h"

namespace bertfit::tune {
namespace {

// The server's port from `serve: listening on HOST:PORT` (0 while not there yet).
int listening_port(const std::string& err) {
  const std::string mark = "serve: listening on ";
  const std::size_t at = err.find(mark);
  if (at == std::string::npos) return 0;
  const std::size_t eol = err.find('\n', at);
  if (eol == std::string::npos) return 0;
  const std::string line = err.substr(at, eol - at);
  return std::atoi(line.c_str() + line.rfind(':') + 1);
}

// The peak resident memory of a live process (VmHWM), in MB; 0 if unknown.
double peak_rss_mb(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  }
  return 0;
}

class ServeRunner : public TrialRunner {
 public:
  explicit ServeRunner(const TrialConfig& c) : c_(c) {
    for (const std::string& text : c_.texts) {
      bodies_.push_back(nlohmann::json{{"inputs", text}}.dump());
    }
  }

  TrialResult run(const Setting& s, const std::function<bool()>& stop) override {
    const Launch launch = launch_of(s, c_.context);
    const std::string base = c_.work_dir + "/serve-" + std::to_string(++count_);
    ChildSpec spec;
    spec.argv = {c_.binary, "serve", "--model", c_.model, "--host", "127.0.0.1", "--port", "0"};
    spec.argv.insert(spec.argv.end(), launch.flags.begin(), launch.flags.end());
    spec.argv.insert(spec.argv.end(), c_.extra.begin(), c_.extra.end());
    spec.env = launch.env;
    spec.stdout_path = base + ".out";
    spec.stderr_path = base + ".err";
    Child child(spec);
    const Timer clock;
    TrialResult r;
    const bool up = child.wait_for_stderr(
        [](const std::string& err) { return listening_port(err) > 0; }, c_.timeout_s, stop);
    if (!up) {
      const bool exited = !child.running();
      if (exited) r.note = last_line(child.err());
      child.kill_group();
      if (stop && stop()) {
        r.status = TrialResult::Status::kInterrupted;
      } else if (!exited) {
        r.status = TrialResult::Status::kTimeout;
        r.note = "serve did not listen within " + std::to_string(int(c_.timeout_s)) + " s";
      }
      return r;
    }
    serve::LoadSpec load;
    load.port = listening_port(child.err());
    load.target = c_.target;
    load.bodies = bodies_;
    load.connections = c_.concurrency;
    load.warmup_s = c_.warmup_s;
    load.measure_s = c_.measure_s;
    load.min_requests = 100;
    const serve::LoadResult l = serve::run_http_load(load);
    const double rss = peak_rss_mb(child.pid());
    const bool alive = child.running();
    child.kill_group();
    if (stop && stop()) {
      r.status = TrialResult::Status::kInterrupted;
      return r;
    }
    if (!alive) {
      r.note = "serve ended during the load: " + last_line(child.err());
      return r;
    }
    if (l.errors > 0 || l.requests == 0) {
      r.note = std::to_string(l.errors) + " of " + std::to_string(l.requests + l.errors) +
               " requests failed: " + l.first_error;
      return r;
    }
    r.status = TrialResult::Status::kOk;
    r.value = c_.objective.name == "latency-p99"  ? l.p99_ms
              : c_.objective.name == "throughput" ? l.requests_per_s
                                                  : l.p50_ms;
    r.metrics = {{"p50_ms", l.p50_ms},
                 {"p90_ms", l.p90_ms},
                 {"p99_ms", l.p99_ms},
                 {"mean_ms", l.mean_ms},
                 {"requests_per_s", l.requests_per_s},
                 {"requests", l.requests},
                 {"steady", l.steady},
                 {"rss_mb", rss}};
    std::remove(spec.stdout_path.c_str());
    std::remove(spec.stderr_path.c_str());
    return r;
  }

 private:
  TrialConfig c_;
  std::vector<std::string> bodies_;
  int count_ = 0;
};

}  // namespace

std::unique_ptr<TrialRunner> make_serve_runner(const TrialConfig& config) {
  return std::make_unique<ServeRunner>(config);
}

}  // namespace bertfit::tune
