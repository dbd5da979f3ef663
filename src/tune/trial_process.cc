// Child processes of trials (trial_process.h).
#include "tune/trial_process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/check.h"
#include "base/error.h"
#include "base/file.h"

extern char** environ;

namespace bertfit::tune {
namespace {

bool knob_variable(const std::string& entry) {
  for (const char* prefix : {"OMP_", "GOMP_", "KMP_", "LD_PRELOAD=", "MALLOC_"}) {
    if (entry.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string read_or_empty(const std::string& path) {
  try {
    return read_file(path);
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace

std::vector<std::string> clean_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!knob_variable(*e)) env.emplace_back(*e);
  }
  return env;
}

Child::Child(const ChildSpec& spec)
    : stdout_path_(spec.stdout_path), stderr_path_(spec.stderr_path) {
  CHECK(!spec.argv.empty(), "a child needs a program");
  // Everything the child touches is ready before fork: after it only async-signal-safe calls.
  std::vector<std::string> env = clean_environment();
  for (const auto& [name, value] : spec.env) env.push_back(name + "=" + value);
  std::vector<char*> argv, envp;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : spec.cores) CPU_SET(c, &set);
  const int out = open(spec.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err = open(spec.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0 || err < 0) {
    if (out >= 0) close(out);
    if (err >= 0) close(err);
    throw_error("cannot write the trial's output files (", spec.stdout_path,
                "): ", std::strerror(errno));
  }
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);
    if (!spec.cores.empty()) sched_setaffinity(0, sizeof(set), &set);
    dup2(out, 1);
    dup2(err, 2);
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    execve(argv[0], argv.data(), envp.data());
    const char msg[] = "tune: cannot start the trial's program\n";
    if (write(2, msg, sizeof(msg) - 1) < 0) _exit(127);
    _exit(127);
  }
  close(out);
  close(err);
  if (pid_ < 0) throw_error("cannot start a trial: fork: ", std::strerror(errno));
  setpgid(pid_, pid_);  // also from here: no race with an early kill of the group
}

Child::~Child() {
  if (pid_ > 0 && exit_code_ < 0) kill_group(0.5);
}

bool Child::reap(bool block) {
  if (exit_code_ >= 0) return true;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, block ? 0 : WNOHANG);
  if (r != pid_) return false;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

bool Child::running() { return !reap(false); }

Child::End Child::wait(double timeout_s, const std::function<bool()>& stop) {
  const double end = now_s() + timeout_s;
  while (!reap(false)) {
    if (stop && stop()) return End::kStopped;
    if (now_s() >= end) return End::kTimeout;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return End::kExited;
}

bool Child::wait_for_stderr(const std::function<bool(const std::string&)>& ready, double timeout_s,
                            const std::function<bool()>& stop) {
  const double end = now_s() + timeout_s;
  for (;;) {
    if (ready(err())) return true;
    if (!running() || (stop && stop()) || now_s() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Child::kill_group(double grace_s) {
  if (pid_ <= 0 || reap(false)) {
    if (pid_ > 0) kill(-pid_, SIGKILL);  // what the trial left behind (mpirun's ranks)
    return;
  }
  kill(-pid_, SIGTERM);
  const double end = now_s() + grace_s;
  while (!reap(false) && now_s() < end) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  kill(-pid_, SIGKILL);
  reap(true);
}

std::string Child::out() const { return read_or_empty(stdout_path_); }
std::string Child::err() const { return read_or_empty(stderr_path_); }

std::string last_line(const std::string& text) {
  std::size_t end = text.size();
  while (end > 0) {
    const std::size_t start = text.rfind('\n', end - 1);
    const std::size_t from = start == std::string::npos ? 0 : start + 1;
    std::string line = text.substr(from, end - from);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r' || line.back() == '\n')) {
      line.pop_back();
    }
    // A line with something to say: mpirun's boxes end in a rule of dashes.
    if (std::any_of(line.begin(), line.end(), [](unsigned char c) { return std::isalnum(c); })) {
      return line;
    }
    if (start == std::string::npos) break;
    end = start;
  }
  return "";
}

}  // namespace bertfit::tune
