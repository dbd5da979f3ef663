// Thread-count control and parallel loops over OpenMP (libgomp, the runtime oneDNN uses too).
// Never throw out of the body of a parallel loop (STYLE.md §7).
#pragma once

#include <cstdint>

namespace bertfit {

// Number of threads used by parallel_for and by oneDNN.
int num_threads();
void set_num_threads(int n);

// Wrappers so headers need not include omp.h.
int omp_thread_index();
int omp_thread_count();
// True inside a parallel region of more than one thread.
bool in_parallel_region();
// The binding libgomp took from OMP_PROC_BIND when it loaded (a later setenv does not change
// it): "false", "true", "primary", "close" or "spread".
const char* omp_binding();

// Runs body(begin, end) over [0, n) split into contiguous chunks, one per thread.
// Falls back to a single call when n is small (below min_per_thread per thread), and inside a
// parallel region: a kernel called on one thread's share of a larger pass (an epilogue run by
// the threads of the pass before it) runs on that thread alone.
template <class Body>
void parallel_for(std::int64_t n, std::int64_t min_per_thread, Body&& body) {
  int threads = num_threads();
  if (threads <= 1 || n < 2 * min_per_thread || in_parallel_region()) {
    if (n > 0) body(std::int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    int t = omp_thread_index();
    int nt = omp_thread_count();
    std::int64_t chunk = (n + nt - 1) / nt;
    std::int64_t begin = t * chunk;
    std::int64_t end = begin + chunk < n ? begin + chunk : n;
    if (begin < end) body(begin, end);
  }
}

// Runs body(i, state) for every i in [0, n), handing the indices out one at a time to whichever
// thread is free: for tasks of uneven cost (attention's (sequence, head) pairs, whose cost
// follows the sequence's length), and so that a thread slowed by something else on its core
// takes fewer. state = make_state() once per thread (scratch buffers). The body must not depend
// on which thread runs which index.
template <class MakeState, class Body>
void parallel_tasks(std::int64_t n, MakeState&& make_state, Body&& body) {
  int threads = num_threads();
  if (threads <= 1 || n < 2 || in_parallel_region()) {
    if (n <= 0) return;
    auto state = make_state();
    for (std::int64_t i = 0; i < n; ++i) body(i, state);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    auto state = make_state();
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < n; ++i) body(i, state);
  }
}

}  // namespace bertfit
