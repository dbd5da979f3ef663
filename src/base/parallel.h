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

// Runs body(begin, end) over [0, n) split into contiguous chunks, one per thread.
// Falls back to a single call when n is small (below min_per_thread per thread).
template <class Body>
void parallel_for(std::int64_t n, std::int64_t min_per_thread, Body&& body) {
  int threads = num_threads();
  if (threads <= 1 || n < 2 * min_per_thread) {
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

}  // namespace bertfit
