// OpenMP-backed thread control.
#include "base/parallel.h"

#include <omp.h>

namespace bertfit {

int num_threads() { return omp_get_max_threads(); }
void set_num_threads(int n) {
  if (n > 0) omp_set_num_threads(n);
}
int omp_thread_index() { return omp_get_thread_num(); }
int omp_thread_count() { return omp_get_num_threads(); }
bool in_parallel_region() { return omp_in_parallel() != 0; }

const char* omp_binding() {
  switch (omp_get_proc_bind()) {
    case omp_proc_bind_false:
      return "false";
    case omp_proc_bind_true:
      return "true";
    case omp_proc_bind_close:
      return "close";
    case omp_proc_bind_spread:
      return "spread";
    default:
      return "primary";
  }
}

}  // namespace bertfit
