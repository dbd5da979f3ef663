// MpiCommunicator's op life cycle: posting, testing, the comm thread, waiting with a deadline,
// and the liveness query that names unresponsive ranks when a wait times out.
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "base/check.h"
#include "comm/mpi_communicator_impl.h"
#include "comm/mpi_runtime.h"

namespace bertfit {
namespace {

constexpr int kQueryTag = 1;
constexpr int kAnswerTag = 2;

std::string join_ranks(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

}  // namespace

void MpiCommunicator::check_usable(const char* what) const {
  if (failed_) {
    throw_error("rank ", rank_, ": ", what,
                " on a communicator that already failed; the job is being aborted");
  }
}

MpiCommunicator::OpPtr MpiCommunicator::submit(std::string what, std::function<int(Op&)> post,
                                               std::function<void(Op&)> complete) {
  check_usable(what.c_str());
  auto op = std::make_shared<Op>();
  op->what = std::move(what);
  op->post = std::move(post);
  op->complete = std::move(complete);
  op->seq = posted_seq_.fetch_add(1) + 1;
  if (mode_ == ProgressMode::kCommThread) {
    {
      std::lock_guard<std::mutex> guard(queue_mutex_);
      queue_.push_back(op);
    }
    queue_cv_.notify_one();
  } else {
    std::lock_guard<std::mutex> guard(mpi::lock());
    post_locked(*op);
    if (op->state.load() == kPosted) active_.push_back(op);
  }
  return op;
}

void MpiCommunicator::post_locked(Op& op) {
  int rc = op.post(op);
  if (rc != MPI_SUCCESS) {
    op.error = cat("rank ", rank_, ": MPI error when starting ", op.what, " (collective #", op.seq,
                   "): ", mpi::error_string(rc));
    finish_locked(op, kFailed);
    return;
  }
  op.state.store(kPosted);
}

void MpiCommunicator::finish_locked(Op& op, int state) {
  if (state == kDone && op.complete) op.complete(op);
  {
    std::lock_guard<std::mutex> guard(done_mutex_);
    op.state.store(state);
  }
  done_cv_.notify_all();
}

bool MpiCommunicator::test_locked(Op& op) {
  if (op.state.load() >= kDone) return true;
  int n = static_cast<int>(op.requests.size());
  int rc = MPI_SUCCESS;
  bool all_done = false;
  if (op.deadline == Clock::time_point::max()) {
    int flag = 0;
    rc = MPI_Testall(n, op.requests.data(), &flag, MPI_STATUSES_IGNORE);
    all_done = flag != 0;
  } else {  // a query: completed requests become MPI_REQUEST_NULL, which records who answered
    std::vector<int> indices(op.requests.size());
    int outcount = 0;
    rc = MPI_Testsome(n, op.requests.data(), &outcount, indices.data(), MPI_STATUSES_IGNORE);
    all_done = std::all_of(op.requests.begin(), op.requests.end(),
                           [](MPI_Request r) { return r == MPI_REQUEST_NULL; });
    all_done = all_done || Clock::now() >= op.deadline;
  }
  if (rc != MPI_SUCCESS) {
    op.error = cat("rank ", rank_, ": MPI error in ", op.what, " (collective #", op.seq,
                   "): ", mpi::error_string(rc), " — a peer process may have died");
    finish_locked(op, kFailed);
    return true;
  }
  if (all_done) finish_locked(op, kDone);
  return all_done;
}

void MpiCommunicator::progress_locked() {
  std::erase_if(active_, [this](const OpPtr& op) { return test_locked(*op); });
  answer_queries_locked();
}

void MpiCommunicator::progress() {
  if (mode_ == ProgressMode::kCommThread || failed_) return;  // the thread drives requests
  std::lock_guard<std::mutex> guard(mpi::lock());
  progress_locked();
}

void MpiCommunicator::answer_queries_locked() {
  while (true) {
    int flag = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, beacon_, &flag, &status) != MPI_SUCCESS || !flag)
      return;
    std::int64_t their_seq = 0;
    MPI_Recv(&their_seq, 1, MPI_INT64_T, status.MPI_SOURCE, kQueryTag, beacon_, MPI_STATUS_IGNORE);
    std::int64_t mine = posted_seq_.load();
    std::fprintf(stderr,
                 "warning: rank %d: rank %d reports no progress on collective #%lld; this rank has "
                 "started %lld collective(s)\n",
                 rank_, status.MPI_SOURCE, static_cast<long long>(their_seq),
                 static_cast<long long>(mine));
    answer_words_.push_back(mine);
    answer_requests_.push_back(MPI_REQUEST_NULL);
    MPI_Isend(&answer_words_.back(), 1, MPI_INT64_T, status.MPI_SOURCE, kAnswerTag, beacon_,
              &answer_requests_.back());
  }
}

// Pacing of the comm thread while requests are outstanding but the last poll finished none.
// Open MPI moves data only inside MPI calls, but the kernel's socket buffers keep sending and
// receiving between them, so a poll every fraction of a millisecond loses no bandwidth at the
// rates where it matters. Spinning, even with yield, costs a whole core whenever the thread
// has one to itself (a rank with fewer compute threads than cores, or a CFS quota: containers
// and the emulated cluster), and under a quota that time is taken from compute: measured on
// 2 emulated nodes of 0.5 core (PERFORMANCE.md), spinning slowed every step by 13 %. So
// (poll_interval_us == 0, the default) the thread yields for a few polls after any completion,
// then sleeps, doubling the pause from 10 us up to 1/128 of the recent time between
// completions (clamped to 20 us .. 1 ms), which scales the poll rate with the link speed.
// poll_interval_us > 0 sleeps that long every time; < 0 always yields.
// When only barriers are outstanding (no data waits in socket buffers for the next poll: the
// trainer's last barrier waits while rank 0 writes the checkpoint and the model, seconds), the
// pause keeps doubling up to 10 ms: at the 1 ms cap those waits cost the other ranks a
// noticeable share of a core in polling (docs/DESIGN.md, "Measurements", data-parallel training).
namespace {
class Pacer {
 public:
  explicit Pacer(double fixed_us) : fixed_us_(fixed_us) {}
  void completed(std::chrono::steady_clock::time_point now) {
    if (last_ != std::chrono::steady_clock::time_point{}) {
      const double gap_us = std::chrono::duration<double, std::micro>(now - last_).count();
      gap_us_ = gap_us_ == 0 ? gap_us : 0.75 * gap_us_ + 0.25 * gap_us;
    }
    last_ = now;
  }
  void reset_idle() { idle_polls_ = 0; }
  void idle_start() { last_ = {}; }  // no requests outstanding: the next gap starts afresh
  void pause(bool barriers_only) {
    if (fixed_us_ > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(fixed_us_));
      return;
    }
    if (fixed_us_ < 0 || ++idle_polls_ <= kYieldPolls) {
      std::this_thread::yield();
      return;
    }
    const double cap = barriers_only ? 10000.0 : std::clamp(gap_us_ / 128, 20.0, 1000.0);
    const double us =
        std::min(cap, 10.0 * std::ldexp(1.0, std::min(idle_polls_ - kYieldPolls, 10)));
    std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(us));
  }

 private:
  static constexpr int kYieldPolls = 8;
  double fixed_us_;
  double gap_us_ = 0;
  int idle_polls_ = 0;
  std::chrono::steady_clock::time_point last_{};
};
}  // namespace

void MpiCommunicator::comm_thread_main() {
  pthread_setname_np(pthread_self(), "bertfit-comm");  // for top -H and /proc/PID/task
  std::vector<OpPtr> incoming;
  Pacer pacer(options_.poll_interval_us);
  while (true) {
    {
      std::unique_lock<std::mutex> guard(queue_mutex_);
      // Idle: sleep until work arrives, waking every 50 ms to answer liveness queries.
      if (active_.empty() && queue_.empty() && !stop_) {
        pacer.idle_start();
        queue_cv_.wait_for(guard, std::chrono::milliseconds(50));
      }
      if (stop_) return;
      incoming.assign(queue_.begin(), queue_.end());
      queue_.clear();
    }
    bool progressed = !incoming.empty(), completed = false, barriers_only = false;
    {
      std::lock_guard<std::mutex> guard(mpi::lock());
      for (const OpPtr& op : incoming) {
        post_locked(*op);
        if (op->state.load() == kPosted) active_.push_back(op);
      }
      std::size_t before = active_.size();
      progress_locked();
      completed = active_.size() != before;
      progressed = progressed || completed;
      barriers_only = std::none_of(active_.begin(), active_.end(),
                                   [](const OpPtr& op) { return op->moves_data; });
    }
    incoming.clear();
    if (completed) pacer.completed(std::chrono::steady_clock::now());
    if (progressed) pacer.reset_idle();
    if (!progressed && !active_.empty()) pacer.pause(barriers_only);
  }
}

void MpiCommunicator::stop_comm_thread() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> guard(queue_mutex_);
    stop_ = true;
  }
  queue_cv_.notify_one();
  thread_.join();
}

void MpiCommunicator::wait_op(const OpPtr& op) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(options_.timeout_seconds));
  if (mode_ == ProgressMode::kCommThread) {
    std::unique_lock<std::mutex> guard(done_mutex_);
    done_cv_.wait_until(guard, deadline, [&] { return op->state.load() >= kDone; });
  } else {
    while (op->state.load() < kDone && Clock::now() < deadline) {
      std::lock_guard<std::mutex> guard(mpi::lock());
      progress_locked();
    }
  }
  int state = op->state.load();
  if (state == kFailed) fail(op->error);
  if (state != kDone) fail_timeout(*op);
}

std::vector<std::int64_t> MpiCommunicator::query_peers(double window_seconds) {
  auto op = std::make_shared<Op>();
  op->what = "liveness query";
  op->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(window_seconds));
  auto world = static_cast<std::size_t>(world_);
  op->post = [this, world](Op& o) {
    // words: [0, world) the query payload sent to each peer, [world, 2 world) their answers.
    o.words.assign(2 * world, -1);
    o.requests.assign(2 * world, MPI_REQUEST_NULL);
    for (std::size_t p = 0; p < world; ++p) {
      if (static_cast<int>(p) == rank_) continue;
      int peer = static_cast<int>(p);
      o.words[p] = posted_seq_.load();
      int rc = MPI_Irecv(&o.words[world + p], 1, MPI_INT64_T, peer, kAnswerTag, beacon_,
                         &o.requests[world + p]);
      if (rc == MPI_SUCCESS)
        rc = MPI_Isend(&o.words[p], 1, MPI_INT64_T, peer, kQueryTag, beacon_, &o.requests[p]);
      if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
  };
  const auto give_up = op->deadline + std::chrono::seconds(2);  // the comm thread itself may hang
  if (mode_ == ProgressMode::kCommThread) {
    {
      std::lock_guard<std::mutex> guard(queue_mutex_);
      queue_.push_back(op);
    }
    queue_cv_.notify_one();
    std::unique_lock<std::mutex> guard(done_mutex_);
    done_cv_.wait_until(guard, give_up, [&] { return op->state.load() >= kDone; });
  } else {
    std::lock_guard<std::mutex> guard(mpi::lock());
    post_locked(*op);
    if (op->state.load() == kPosted) active_.push_back(op);
    while (op->state.load() < kDone && Clock::now() < give_up) progress_locked();
  }
  std::vector<std::int64_t> answers(world, -1);
  if (op->state.load() == kDone) {
    for (std::size_t p = 0; p < world; ++p) {
      if (op->requests[world + p] == MPI_REQUEST_NULL) answers[p] = op->words[world + p];
    }
  }
  answers[static_cast<std::size_t>(rank_)] = posted_seq_.load();
  abandoned_.push_back(op);  // unanswered receives may still be written into op->words
  return answers;
}

void MpiCommunicator::fail_timeout(const Op& op) {
  double window = std::clamp(options_.timeout_seconds / 10, 1.0, 5.0);
  std::vector<std::int64_t> answers = query_peers(window);
  std::vector<int> silent, behind;
  for (int p = 0; p < world_; ++p) {
    std::int64_t seq = answers[static_cast<std::size_t>(p)];
    if (seq < 0) silent.push_back(p);
    if (seq >= 0 && seq < op.seq) behind.push_back(p);
  }
  std::string message = cat("rank ", rank_, ": no progress on ", op.what, " (collective #", op.seq,
                            ") for ", options_.timeout_seconds, " s; ");
  if (!silent.empty()) {
    message += cat("rank(s) not responding: ", join_ranks(silent),
                   " — a peer process may have died or stalled");
  }
  if (!behind.empty()) {
    message += cat(silent.empty() ? "" : "; ",
                   "rank(s) alive but not at this collective yet: ", join_ranks(behind),
                   " — a peer process is stalled or its collectives diverged");
  }
  if (silent.empty() && behind.empty()) {
    message +=
        "every rank has reached this collective; the network between the ranks may be stalled";
  }
  fail(message + " (timeout: --comm-timeout)");
}

void MpiCommunicator::fail(const std::string& message) {
  failed_ = true;
  mpi::mark_failed(1);
  stop_comm_thread();  // no MPI progress after this, so no writes into abandoned buffers
  std::fprintf(stderr, "error: %s\n", message.c_str());
  std::fflush(stderr);
  throw Error(message);
}

void MpiCommunicator::wait_setup_request(MPI_Request& request, const char* what) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(options_.timeout_seconds));
  int flag = 0;
  while (!flag) {
    {
      std::lock_guard<std::mutex> guard(mpi::lock());
      int rc = MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS)
        fail(cat("rank ", rank_, ": MPI error in ", what, ": ", mpi::error_string(rc)));
    }
    if (!flag && Clock::now() >= deadline) {
      fail(cat(
          "rank ", rank_, ": no progress on ", what, " for ", options_.timeout_seconds,
          " s; a peer process may not have started, or may have died (timeout: --comm-timeout)"));
    }
  }
}

}  // namespace bertfit
