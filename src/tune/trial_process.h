// One process of a trial: fork, its own process group (so a terminal's Ctrl-C reaches only
// tune, and a trial is killed with everything it started, mpirun's ranks included), pinned to
// its cores, exec'd with the knobs' environment on top of tune's own minus every variable a knob
// sets. stdout and stderr go to files the trial reads back. posix_spawn cannot set the CPU
// affinity of the child, so this forks; everything the child needs is built before the fork.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace bertfit::tune {

struct ChildSpec {
  std::vector<std::string> argv;                         // argv[0]: the program's path
  std::vector<std::pair<std::string, std::string>> env;  // set on top of clean_environment()
  std::vector<int> cores;                                // empty: tune's own
  std::string stdout_path, stderr_path;                  // created or truncated
};

// Tune's environment without the variables knobs set (OMP_*, GOMP_*, KMP_*, LD_PRELOAD,
// MALLOC_*), so that a knob's default means the library's own default.
std::vector<std::string> clean_environment();

class Child {
 public:
  explicit Child(const ChildSpec& spec);  // starts it; throws Error when fork fails
  ~Child();                               // kills the group if still running
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  enum class End { kExited, kTimeout, kStopped };
  // Waits for the exit, at most timeout_s, polling `stop` (Ctrl-C) every 20 ms.
  End wait(double timeout_s, const std::function<bool()>& stop);
  // Waits until `ready(stderr so far)` holds; false when the child exited, the time ran out
  // or `stop` held first.
  bool wait_for_stderr(const std::function<bool(const std::string&)>& ready, double timeout_s,
                       const std::function<bool()>& stop);
  // SIGTERM to the group, then SIGKILL after grace_s; reaps the child.
  void kill_group(double grace_s = 2.0);
  bool running();
  pid_t pid() const { return pid_; }
  int exit_code() const { return exit_code_; }  // after kExited: the code, or 128 + signal
  std::string out() const;
  std::string err() const;

 private:
  bool reap(bool block);
  pid_t pid_ = -1;
  int exit_code_ = -1;
  std::string stdout_path_, stderr_path_;
};

// The last line of a text with a letter or digit in it, trimmed ("" if none): a failed
// trial's reason (mpirun's messages end in a rule of dashes).
std::string last_line(const std::string& text);

}  // namespace bertfit::tune
