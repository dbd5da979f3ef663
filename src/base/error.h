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
  using std::runtime_error::runtime_error;
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
