// MpiCommunicator: the Communicator over MPI. Internal to comm/ (includes <mpi.h>).
//
// Every collective, blocking or not, is an Op: a function that posts non-blocking MPI requests
// (MPI_Iallreduce, MPI_Ibcast, ...), the requests, and a completion step (bf16 -> fp32). Ops are
// posted in call order, so all ranks post the same sequence; the sequence number (`seq`) of an
// op names it in timeout messages. Blocking collectives are an Op plus wait_op().
//
// Progress (ProgressMode): in kTestBetweenLayers the calling thread posts ops at once and tests
// them in progress()/wait(); in kCommThread the ops are queued to one thread that makes every
// MPI call of this communicator, tests outstanding requests continuously and signals
// completion through a condition variable.
//
// Timeouts: wait_op() gives up after options.timeout_seconds. It then sends a query on a
// separate "beacon" communicator to every peer; a live peer answers (from its own wait loop or
// comm thread) with the number of ops it has posted. Peers that do not answer, or that answer
// with a number below the stuck op's, are named in the error.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"

namespace bertfit {

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(const CommOptions& options);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  int local_rank() const override { return local_rank_; }
  int local_world() const override { return local_world_; }
  std::string backend() const override;
  std::string host() const override { return host_; }

  void allreduce_sum(float* data, std::int64_t n) override;
  void allreduce_sum(double* data, std::int64_t n) override;
  void broadcast(void* data, std::int64_t bytes, int root) override;
  std::vector<float> allgatherv(const std::vector<float>& local) override;
  void barrier() override;

  Handle start_allreduce(float* data, std::int64_t n, WireDType wire) override;
  void wait(Handle h) override;
  void progress() override;
  [[noreturn]] void abort(const std::string& message, int code) override;
  double thread_cpu_seconds() const override;

 private:
  using Clock = std::chrono::steady_clock;
  MpiCommunicator(const CommOptions& options, int delegated);  // MPI set-up, no threads yet
  enum State : int { kQueued, kPosted, kDone, kFailed };

  struct Op {
    std::string what;                   // "gradient all-reduce", "broadcast", ... for messages
    std::int64_t seq = 0;               // 1, 2, ... in posting order; 0 for a liveness query
    std::function<int(Op&)> post;       // posts requests (MPI lock held); returns an MPI code
    std::function<void(Op&)> complete;  // runs once every request has completed
    std::vector<MPI_Request> requests;
    std::vector<std::uint16_t> bf16;  // wire buffer of a bf16 all-reduce
    std::vector<std::int64_t> words;  // small payloads (counts, query answers)
    Clock::time_point deadline = Clock::time_point::max();  // queries end here, complete or not
    std::atomic<int> state{kQueued};
    std::string error;
    bool moves_data = true;  // false: a barrier; the comm thread polls it less often
  };
  using OpPtr = std::shared_ptr<Op>;

  // Op life cycle (mpi_progress.cc).
  OpPtr submit(std::string what, std::function<int(Op&)> post,
               std::function<void(Op&)> complete = nullptr);
  void wait_op(const OpPtr& op);
  void post_locked(Op& op);
  bool test_locked(Op& op);  // true once the op is kDone or kFailed
  void finish_locked(Op& op, int state);
  void progress_locked();
  void answer_queries_locked();
  void comm_thread_main();
  void stop_comm_thread();
  std::vector<std::int64_t> query_peers(double window_seconds);
  [[noreturn]] void fail_timeout(const Op& op);
  [[noreturn]] void fail(const std::string& message);
  void check_usable(const char* what) const;
  void wait_setup_request(MPI_Request& request, const char* what);

  CommOptions options_;
  ProgressMode mode_;
  MPI_Comm comm_ = MPI_COMM_NULL;    // collectives
  MPI_Comm beacon_ = MPI_COMM_NULL;  // liveness queries and answers
  int rank_ = 0, world_ = 1, local_rank_ = 0, local_world_ = 1;
  std::string host_, version_;
  bool failed_ = false;

  std::atomic<std::int64_t> posted_seq_{0};  // ops submitted so far (what queries report)
  Handle next_handle_ = 1;
  std::map<Handle, OpPtr> handles_;
  std::vector<OpPtr> active_;     // posted, not finished: caller thread or comm thread only
  std::vector<OpPtr> abandoned_;  // unfinished queries whose buffers MPI may still write
  std::deque<std::int64_t> answer_words_;
  std::vector<MPI_Request> answer_requests_;

  std::thread thread_;  // the comm thread (kCommThread)
  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  std::deque<OpPtr> queue_;
  bool stop_ = false;
  std::mutex done_mutex_;
  std::condition_variable done_cv_;
};

}  // namespace bertfit
