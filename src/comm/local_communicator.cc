// LocalCommunicator: identity collectives, with the same argument checks and handle rules as
// the MPI communicator so that misuse shows up in single-process tests too.
#include "comm/local_communicator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "base/check.h"

namespace bertfit {

std::string LocalCommunicator::host() const {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

void LocalCommunicator::allreduce_sum(float* data, std::int64_t n) {
  CHECK(n >= 0 && (data != nullptr || n == 0), "allreduce_sum: n=", n);
}

void LocalCommunicator::allreduce_sum(double* data, std::int64_t n) {
  CHECK(n >= 0 && (data != nullptr || n == 0), "allreduce_sum: n=", n);
}

void LocalCommunicator::broadcast(void* data, std::int64_t bytes, int root) {
  CHECK(bytes >= 0 && (data != nullptr || bytes == 0), "broadcast: bytes=", bytes);
  CHECK(root == 0, "broadcast: root ", root, " is not a rank of a 1-rank job");
}

Communicator::Handle LocalCommunicator::start_allreduce(float* data, std::int64_t n, WireDType) {
  CHECK(n >= 0 && (data != nullptr || n == 0), "start_allreduce: n=", n);
  outstanding_.push_back(next_handle_);
  return next_handle_++;
}

void LocalCommunicator::wait(Handle h) {
  auto it = std::find(outstanding_.begin(), outstanding_.end(), h);
  CHECK(it != outstanding_.end(), "wait: unknown or already waited handle ", h);
  outstanding_.erase(it);
}

void LocalCommunicator::abort(const std::string& message, int code) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  std::fflush(stderr);
  std::exit(code == 0 ? 1 : code);
}

}  // namespace bertfit
