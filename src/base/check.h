// Invariant checks (tier 1 of STYLE.md §7): CHECK(cond, values...) aborts with file:line, the
// condition and the values when a programming error is detected. Never for user input.
#pragma once

#include "base/error.h"

namespace bertfit::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* cond,
                               const std::string& msg);
}  // namespace bertfit::detail

#define CHECK(cond, ...)                                                                       \
  do {                                                                                         \
    if (!(cond)) [[unlikely]] {                                                                \
      ::bertfit::detail::check_failed(__FILE__, __LINE__, #cond, ::bertfit::cat(__VA_ARGS__)); \
    }                                                                                          \
  } while (0)
