// LocalCommunicator: the single-process Communicator (rank 0 of 1). Every collective is the
// identity, so the trainer runs the same code with or without MPI.
#pragma once

#include "comm/communicator.h"

namespace bertfit {

class LocalCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_world() const override { return 1; }
  std::string backend() const override { return "local"; }
  std::string host() const override;

  void allreduce_sum(float* data, std::int64_t n) override;
  void allreduce_sum(double* data, std::int64_t n) override;
  void broadcast(void* data, std::int64_t bytes, int root) override;
  std::vector<float> allgatherv(const std::vector<float>& local) override { return local; }
  void barrier() override {}

  Handle start_allreduce(float* data, std::int64_t n, WireDType wire) override;
  void wait(Handle h) override;
  void progress() override {}
  [[noreturn]] void abort(const std::string& message, int code) override;

 private:
  Handle next_handle_ = 1;
  std::vector<Handle> outstanding_;
};

}  // namespace bertfit
