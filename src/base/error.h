// User-facing errors (tier 2 of STYLE.md §7): anything a user, a file or the network can cause.
// Throw bertfit::Error with an actionable message that names the file, line, flag or tensor;
// the CLI prints it on one line and exits non-zero. Broken invariants use CHECK (check.h).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace bertfit {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int exit_code = 1)
      : std::runtime_error(message), exit_code_(exit_code) {}
  // The process exit code the CLI uses for it: 1, or 128 + signal for a run stopped by one.
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// An error every rank of a data-parallel job raises alike (the command line's, or one the ranks
// agreed on at set-up: comm/communicator.h): the CLI prints it on rank 0 only, so the job reports
// it once, and every rank exits with its code.
class JobError : public Error {
 public:
  using Error::Error;
};

// Concatenates anything streamable: cat("file ", path, ":", line) -> std::string.
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// throw_error("bad value ", x, " in ", file): shorthand for throw Error(cat(...)).
template <class... Args>
[[noreturn]] void throw_error(const Args&... args) {
  throw Error(cat(args...));
}

}  // namespace bertfit
