// Reports a failed CHECK and aborts.
#include "base/check.h"

#include <cstdio>
#include <cstdlib>

namespace bertfit::detail {

void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "CHECK failed at %s:%d: %s %s\n", file, line, cond, msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace bertfit::detail
