// The request queue and its compute worker (see batcher.h).
#include "serve/batcher.h"

#include <algorithm>

#include "base/check.h"
#include "base/log.h"
#include "base/parallel.h"

namespace bertfit::serve {

Batcher::Batcher(Engine& engine, Metrics& metrics, BatchLimits limits,
                 const std::function<void()>& warm_up)
    : engine_(engine), metrics_(metrics), limits_(limits) {
  CHECK(limits_.max_batch_tokens > 0, "max_batch_tokens ", limits_.max_batch_tokens);
  CHECK(limits_.max_queued_tokens >= limits_.max_batch_tokens, "max_queued_tokens ",
        limits_.max_queued_tokens);
  // A batch has at most max_batch_tokens inputs and output rows (one per input or per token,
  // of the head's outputs or, when the engine gives them, of token rows).
  const auto most = static_cast<std::size_t>(limits_.max_batch_tokens);
  sequences_.reserve(most);
  outputs_.reserve(most);
  int width = engine_.output_width();
  if (engine_.serves_token_rows()) width = std::max(width, engine_.output_width(Output::kTokens));
  logits_.reserve(most * static_cast<std::size_t>(width));
  worker_ = std::thread([this, &warm_up] { work(warm_up); });
  std::unique_lock lock(mu_);
  wake_.wait(lock, [this] { return ready_; });
  if (warm_up_error_) {
    lock.unlock();
    worker_.join();
    std::rethrow_exception(warm_up_error_);
  }
}

Batcher::~Batcher() { stop(); }

Admission Batcher::submit(std::shared_ptr<Job> job) {
  const std::size_t n = job->inputs.size();
  CHECK(n > 0, "empty job");
  std::int64_t tokens = 0;
  for (const Encoding& input : job->inputs) {
    const auto t = static_cast<std::int64_t>(input.input_ids.size());
    CHECK(t <= limits_.max_batch_tokens, "input of ", t, " tokens");
    tokens += t;
  }
  CHECK(job->output == Output::kHead || engine_.serves_token_rows(), "token rows asked of a ",
        "model whose head does not pool them");
  job->row_start.assign(1, 0);
  for (const Encoding& input : job->inputs) {
    job->row_start.push_back(job->row_start.back() + engine_.output_rows(input, job->output));
  }
  job->width = static_cast<std::size_t>(engine_.output_width(job->output));
  job->logits.assign(job->row_start.back() * job->width, 0.0f);
  job->remaining = n;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Admission::kStopping;
    if (queued_tokens_ > 0 && queued_tokens_ + tokens > limits_.max_queued_tokens) {
      return Admission::kFull;
    }
    job->enqueued = Clock::now();
    for (std::size_t i = 0; i < n; ++i) queue_.push_back({job, i});
    queued_tokens_ += tokens;
    metrics_.set_queue_size(static_cast<std::int64_t>(queue_.size()));
  }
  wake_.notify_one();
  return Admission::kQueued;
}

bool Batcher::healthy() const {
  std::lock_guard lock(mu_);
  return ready_ && !warm_up_error_ && !stopping_ && !last_batch_failed_;
}

void Batcher::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (worker_.joinable()) worker_.join();
}

std::int64_t Batcher::queued() const {
  std::lock_guard lock(mu_);
  return static_cast<std::int64_t>(queue_.size());
}

void Batcher::work(const std::function<void()>& warm_up) {
  set_num_threads(limits_.threads);  // OpenMP's thread count is per calling thread
  std::exception_ptr error;
  try {
    if (warm_up) warm_up();
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard lock(mu_);
    ready_ = true;
    warm_up_error_ = error;
  }
  wake_.notify_all();
  if (error) return;
  std::vector<Item> batch, expired;
  const auto max_wait = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(limits_.max_queue_seconds));
  for (;;) {
    batch.clear();
    expired.clear();
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping, and nothing left to compute
      // Everything queued that fits, in arrival order; the first item always fits. Items that
      // waited too long are set aside, not computed.
      const Clock::time_point now = Clock::now();
      std::int64_t tokens = 0;
      while (!queue_.empty()) {
        const Item& next = queue_.front();
        const auto t = static_cast<std::int64_t>(next.job->inputs[next.index].input_ids.size());
        if (now - next.job->enqueued > max_wait || next.job->gone()) {
          queued_tokens_ -= t;
          expired.push_back(std::move(queue_.front()));
          queue_.pop_front();
          continue;
        }
        const bool full = tokens + t > limits_.max_batch_tokens ||
                          (limits_.max_batch_requests > 0 &&
                           static_cast<std::int64_t>(batch.size()) >= limits_.max_batch_requests);
        if (!batch.empty() && full) break;
        tokens += t;
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      queued_tokens_ -= tokens;
      metrics_.set_queue_size(static_cast<std::int64_t>(queue_.size()));
      if (!batch.empty()) metrics_.batch(static_cast<std::int64_t>(batch.size()), tokens);
    }
    expire(expired);
    if (!batch.empty()) run_batch(batch);
  }
}

void Batcher::expire(std::vector<Item>& expired) {
  for (Item& item : expired) {
    Job& job = *item.job;
    if (!job.gone()) job.timed_out = true;
    job.failed = true;
    if (--job.remaining == 0) job.on_done(item.job);
  }
}

void Batcher::run_batch(std::vector<Item>& batch) {
  const Clock::time_point start = Clock::now();
  sequences_.clear();
  outputs_.clear();
  std::size_t values = 0;
  for (const Item& item : batch) {
    sequences_.push_back(&item.job->inputs[item.index]);
    outputs_.push_back(item.job->output);
    values += engine_.output_rows(*sequences_.back(), item.job->output) * item.job->width;
  }
  logits_.resize(values);
  bool failed = false;
  try {
    engine_.run(sequences_, logits_.data(), outputs_);
  } catch (const std::exception& e) {
    // An Error from the model (none is expected for valid encodings) fails these jobs, not the
    // server.
    log_warn("serve: batch of ", batch.size(), " inputs failed: ", e.what());
    failed = true;
  }
  last_batch_failed_ = failed;
  const double inference = std::chrono::duration<double>(Clock::now() - start).count();
  metrics_.inference(inference);
  std::size_t at = 0;  // where batch[i]'s values start in logits_
  for (std::size_t i = 0; i < batch.size(); ++i) {
    Job& job = *batch[i].job;
    const double queued = std::chrono::duration<double>(start - job.enqueued).count();
    metrics_.queue(queued);
    job.queue_seconds += queued;
    job.inference_seconds += inference;
    if (failed) job.failed = true;
    const std::size_t n = engine_.output_rows(*sequences_[i], job.output) * job.width;
    std::copy_n(logits_.data() + at, n,
                job.logits.data() + job.row_start[batch[i].index] * job.width);
    at += n;
    if (--job.remaining == 0) job.on_done(batch[i].job);
  }
}

}  // namespace bertfit::serve
