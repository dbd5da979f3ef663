// Wall-clock timing for logs and benchmarks, and the CPU time of a running thread.
#pragma once

#include <pthread.h>

#include <chrono>
#include <ctime>

namespace bertfit {

class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  void reset() { start_ = std::chrono::steady_clock::now(); }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// CPU seconds a live thread has run so far (the scheduler's exact runtime, what a CFS quota
// charges); 0 if it cannot be read.
inline double thread_cpu_seconds(pthread_t thread) {
  clockid_t clock{};
  timespec ts{};
  if (pthread_getcpuclockid(thread, &clock) != 0 || clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace bertfit
