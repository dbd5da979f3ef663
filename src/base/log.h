// Rank-aware logging to stderr. Only rank 0 prints info lines unless verbose; warnings and
// errors print on every rank, prefixed with the rank when there is more than one.
#pragma once

#include <string>

#include "base/error.h"

namespace bertfit {

struct LogConfig {
  int rank = 0;
  int world = 1;
  bool verbose = false;
};
void set_log_config(const LogConfig& config);
const LogConfig& log_config();

void log_line(const char* level, const std::string& message);

template <class... Args>
void log_info(const Args&... args) {
  if (log_config().rank == 0 || log_config().verbose) log_line("info", cat(args...));
}
template <class... Args>
void log_warn(const Args&... args) {
  log_line("warning", cat(args...));
}

}  // namespace bertfit
