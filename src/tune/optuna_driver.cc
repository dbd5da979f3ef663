// The optuna child (optuna_driver.h): the Python driver's text, the pipes, the protocol.
#include "tune/optuna_driver.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "base/error.h"

namespace bertfit::tune {
namespace {

// One JSON request per line in, one JSON answer per line out; every failure is an answer
// {"error": "..."}. Ordered knobs are offered to TPE as integer indices (so it can use their
// order), the others as categories.
constexpr const char* kDriver = R"PY(
import json, sys, warnings
warnings.filterwarnings("ignore")
def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
try:
    import optuna
    from optuna.trial import TrialState
    from optuna.importance import FanovaImportanceEvaluator, get_param_importances
    import sklearn  # noqa: F401  (fANOVA's random forest)
except Exception as e:
    out({"error": "import: %s" % e}); sys.exit(0)
optuna.logging.set_verbosity(optuna.logging.ERROR)
study, dims, seed = None, [], 0
def suggest(t, d):
    if d["ordinal"]:
        return d["values"][t.suggest_int(d["name"], 0, len(d["values"]) - 1)]
    return t.suggest_categorical(d["name"], d["values"])
def encode(params):
    return {d["name"]: (d["values"].index(params[d["name"]]) if d["ordinal"] else params[d["name"]])
            for d in dims}
for line in sys.stdin:
    try:
        r = json.loads(line)
        op = r["op"]
        if op == "start":
            dims, seed = r["dims"], r["seed"]
            sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=r["startup"],
                                                 multivariate=True)
            study = optuna.create_study(sampler=sampler,
                                        direction="minimize" if r["minimize"] else "maximize")
            out({"ok": True})
        elif op == "ask":
            t = study.ask()
            out({"number": t.number, "params": {d["name"]: suggest(t, d) for d in dims}})
        elif op == "tell":
            number = r["number"]
            if number < 0:
                study.enqueue_trial(encode(r["params"]))
                t = study.ask()
                for d in dims: suggest(t, d)
                number = t.number
            if r["value"] is None:
                study.tell(number, state=TrialState.FAIL)
            else:
                study.tell(number, r["value"])
            out({"ok": True})
        elif op == "importance":
            ev = FanovaImportanceEvaluator(seed=seed)
            out({"importance": get_param_importances(study, evaluator=ev)})
        else:
            out({"error": "unknown op " + op})
    except Exception as e:
        out({"error": "%s: %s" % (type(e).__name__, e)})
)PY";

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string optuna_missing_message() {
  return "--sampler tpe needs Debian's python3-optuna and python3-sklearn for /usr/bin/python3 "
         "(apt-get install python3-optuna python3-sklearn), or use --sampler random";
}

OptunaDriver::OptunaDriver(const Space& space, bool minimize, unsigned seed, int startup) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    throw_error("cannot start optuna: pipe: ", std::strerror(errno));
  }
  const char* argv[] = {"/usr/bin/python3", "-c", kDriver, nullptr};
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);  // Ctrl-C reaches tune only: it stops the child itself
    dup2(in[0], 0);
    dup2(out[1], 1);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 2);
    execv(argv[0], const_cast<char* const*>(argv));
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  to_child_ = in[1];
  from_child_ = out[0];
  if (pid_ < 0) throw_error("cannot start optuna: fork: ", std::strerror(errno));
  nlohmann::json dims = nlohmann::json::array();
  for (const Space::Dim& d : space.dims) {
    dims.push_back({{"name", d.knob->name}, {"values", d.values}, {"ordinal", d.knob->ordinal}});
  }
  const nlohmann::json r = call({{"op", "start"},
                                 {"dims", dims},
                                 {"minimize", minimize},
                                 {"seed", seed},
                                 {"startup", startup}},
                                60);
  if (r.contains("error"))
    throw_error(optuna_missing_message(), " (", r["error"].get<std::string>(), ")");
}

OptunaDriver::~OptunaDriver() {
  if (to_child_ >= 0) close(to_child_);  // end of input: the driver's loop ends
  if (from_child_ >= 0) close(from_child_);
  if (pid_ > 0) {
    for (int i = 0; i < 50; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      usleep(20000);
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

nlohmann::json OptunaDriver::call(const nlohmann::json& request, double timeout_s) {
  const std::string line = request.dump() + "\n";
  signal(SIGPIPE, SIG_IGN);
  for (std::size_t done = 0; done < line.size();) {
    const ssize_t n = write(to_child_, line.data() + done, line.size() - done);
    if (n <= 0) throw_error(optuna_missing_message(), " (the optuna driver is gone)");
    done += static_cast<std::size_t>(n);
  }
  const double end = now_s() + timeout_s;
  for (;;) {
    const std::size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      const std::string answer = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      try {
        return nlohmann::json::parse(answer);
      } catch (const nlohmann::json::exception&) {
        throw_error("optuna's driver answered '", answer.substr(0, 200), "'");
      }
    }
    pollfd p{from_child_, POLLIN, 0};
    const int wait_ms = static_cast<int>(std::max(0.0, end - now_s()) * 1000);
    if (poll(&p, 1, wait_ms) <= 0) {
      throw_error("optuna's driver did not answer within ", timeout_s, " s");
    }
    char chunk[4096];
    const ssize_t n = read(from_child_, chunk, sizeof(chunk));
    if (n <= 0) throw_error(optuna_missing_message(), " (/usr/bin/python3 ended)");
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

Setting OptunaDriver::ask() {
  const nlohmann::json r = call({{"op", "ask"}}, 30);
  if (r.contains("error")) throw_error("optuna: ", r["error"].get<std::string>());
  pending_number_ = r["number"].get<long>();
  pending_ = r["params"].get<Setting>();
  return pending_;
}

void OptunaDriver::tell(const Setting& s, const double* value) {
  const long number = (pending_number_ >= 0 && s == pending_) ? pending_number_ : -1;
  if (number >= 0) pending_number_ = -1;
  const nlohmann::json r = call({{"op", "tell"},
                                 {"number", number},
                                 {"params", s},
                                 {"value", value ? nlohmann::json(*value) : nlohmann::json()}},
                                30);
  if (r.contains("error")) throw_error("optuna: ", r["error"].get<std::string>());
}

nlohmann::json OptunaDriver::importance() {
  const nlohmann::json r = call({{"op", "importance"}}, 120);
  if (r.contains("error")) throw_error("optuna: ", r["error"].get<std::string>());
  return r["importance"];
}

}  // namespace bertfit::tune
