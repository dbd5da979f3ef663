// Dynamic batching for `bertfit serve`. Requests are tokenized on the connection threads and
// submitted as Jobs; each input of a Job is queued as its own item. ONE compute worker takes,
// as soon as it is free and with no timer, every queued item (in arrival order) that fits in
// max_batch_tokens real tokens (and max_batch_requests items, if set), runs them as one batch
// on the Engine, and completes each Job when its last item is done. An idle worker sleeps on a
// condition variable.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "serve/engine.h"
#include "serve/metrics.h"

namespace bertfit::serve {

using Clock = std::chrono::steady_clock;

// One client request's inputs and, when done, their logits.
struct Job {
  std::vector<Encoding> inputs;
  std::vector<float> logits;  // (inputs, K), filled by the worker
  // Called once, on the compute worker's thread, when every input has its logits (or the
  // server is stopping without computing them: then failed is set). Must return quickly.
  std::function<void(std::shared_ptr<Job>)> on_done;
  bool failed = false;
  // Timing, summed over the inputs (seconds): queue wait and the inference of their batches.
  double queue_seconds = 0, inference_seconds = 0;

  // Set by the batcher.
  Clock::time_point enqueued;
  std::atomic<std::size_t> remaining{0};
};

struct BatchLimits {
  std::int64_t max_batch_tokens = 16384;  // real tokens per batch
  std::int64_t max_batch_requests = 0;    // inputs per batch; 0: no limit
  int threads = 0;  // the compute worker's OpenMP threads (a per-thread setting); 0: the default
};

class Batcher {
 public:
  // Starts the compute worker and returns once it has run warm_up (if set; e.g. the Engine's,
  // so that the worker's own OpenMP threads and their scratch are the ones warmed up).
  Batcher(Engine& engine, Metrics& metrics, BatchLimits limits,
          const std::function<void()>& warm_up = {});
  // Stops the worker after the queue is empty (stop()).
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues every input of the job (each of at most max_batch_tokens tokens). False if the batcher
  // is stopped (the job is then not queued and on_done is not called).
  bool submit(std::shared_ptr<Job> job);

  // Computes what is queued, then ends the worker. Idempotent.
  void stop();

  std::int64_t queued() const;

 private:
  struct Item {
    std::shared_ptr<Job> job;
    std::size_t index;
  };
  void work(const std::function<void()>& warm_up);
  void run_batch(std::vector<Item>& batch);

  Engine& engine_;
  Metrics& metrics_;
  BatchLimits limits_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Item> queue_;
  std::int64_t queued_tokens_ = 0;
  bool stopping_ = false;
  bool ready_ = false;
  std::exception_ptr warm_up_error_;
  std::thread worker_;
  // The worker's reused buffers.
  std::vector<const Encoding*> sequences_;
  std::vector<float> logits_;
};

}  // namespace bertfit::serve
