// Implementation of the rank-aware logger.
#include "base/log.h"

#include <cstdio>
#include <mutex>

namespace bertfit {
namespace {
LogConfig g_config;
std::mutex g_mutex;
}  // namespace

void set_log_config(const LogConfig& config) { g_config = config; }
const LogConfig& log_config() { return g_config; }

void log_line(const char* level, const std::string& message) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_config.world > 1) {
    std::fprintf(stderr, "[rank %d] %s: %s\n", g_config.rank, level, message.c_str());
  } else {
    std::fprintf(stderr, "%s: %s\n", level, message.c_str());
  }
  std::fflush(stderr);
}

}  // namespace bertfit
