// Dynamic batching for `bertfit serve`. Requests are tokenized on the connection threads and
// submitted as Jobs; each input of a Job is queued as its own item. ONE compute worker takes,
// as soon as it is free and with no timer, every queued item (in arrival order) that fits in
// max_batch_tokens real tokens (and max_batch_requests items, if set), runs them as one batch
// on the Engine, and completes each Job when its last item is done. An idle worker sleeps on a
// condition variable.
//
// Admission is bounded by work, not by count: a job is refused (kFull) when the real tokens
// already waiting plus its own would pass max_queued_tokens (an empty queue takes any job). An
// input that has waited over max_queue_seconds when the worker reaches it is not computed: its
// job completes with timed_out set. Nor is the input of a job whose client has gone
// (Job::client_gone).
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

// One client request's inputs and, when done, their outputs.
struct Job {
  std::vector<Encoding> inputs;
  // What the engine gives for each input: the head's outputs, or its token rows (/embed_all).
  Output output = Output::kHead;
  // Filled by the worker: each input's Engine::output_rows() rows of `width` values, in order;
  // input i's start at row row_start[i] (row_start has inputs + 1 entries; both set by submit).
  std::vector<float> logits;
  std::vector<std::size_t> row_start;
  std::size_t width = 0;
  // Called once, on the compute worker's thread, when every input has its logits (or the
  // server is stopping without computing them: then failed is set). The service formats the
  // answer there (bounded by --max-answer-bytes), so that the queue's deadline counts it and no
  // connection thread waits behind it.
  std::function<void(std::shared_ptr<Job>)> on_done;
  bool failed = false;
  bool timed_out = false;  // some input waited over max_queue_seconds (then failed is set too)
  // Set (by the connection) when the client has gone: the inputs not yet computed are dropped
  // (then failed is set too) and the answer is not formatted.
  std::shared_ptr<const std::atomic<bool>> client_gone;
  bool gone() const { return client_gone && client_gone->load(); }
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
  std::int64_t max_queued_tokens = 4 * 16384;  // real tokens waiting, at least max_batch_tokens
  double max_queue_seconds = 30;               // an input's longest wait for the worker
};

enum class Admission { kQueued, kFull, kStopping };

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

  // Queues every input of the job (each of at most max_batch_tokens tokens), or none: kFull when
  // they do not fit in max_queued_tokens, kStopping once stop() has begun. on_done is called only
  // for a queued job.
  Admission submit(std::shared_ptr<Job> job);

  // The worker is running and its last batch did not fail; answered at once, never queued.
  bool healthy() const;

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
  // Completes the inputs that waited too long or whose client has gone (taken off the queue by
  // the worker).
  void expire(std::vector<Item>& expired);

  Engine& engine_;
  Metrics& metrics_;
  BatchLimits limits_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Item> queue_;
  std::int64_t queued_tokens_ = 0;
  bool stopping_ = false;
  bool ready_ = false;
  std::atomic<bool> last_batch_failed_{false};
  std::exception_ptr warm_up_error_;
  std::thread worker_;
  // The worker's reused buffers.
  std::vector<const Encoding*> sequences_;
  std::vector<Output> outputs_;
  std::vector<float> logits_;
};

}  // namespace bertfit::serve
