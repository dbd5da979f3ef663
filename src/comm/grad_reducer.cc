// GradReducer: bucket formation, starting buckets as backward finishes them, and the final
// wait-and-scale.
#include "comm/grad_reducer.h"

#include <algorithm>

#include "base/check.h"
#include "base/parallel.h"
#include "base/timer.h"

namespace bertfit {

std::vector<GradBucket> make_buckets(std::vector<std::int64_t> boundaries, std::int64_t total,
                                     std::int64_t bucket_bytes) {
  CHECK(total >= 0, "make_buckets: total=", total);
  CHECK(bucket_bytes > 0, "make_buckets: bucket_bytes=", bucket_bytes);
  for (std::int64_t b : boundaries)
    CHECK(b >= 0 && b <= total, "boundary ", b, " outside [0, ", total, "]");
  boundaries.push_back(0);
  std::sort(boundaries.begin(), boundaries.end());
  boundaries.erase(std::unique(boundaries.begin(), boundaries.end()), boundaries.end());
  const std::int64_t floats = std::max<std::int64_t>(1, bucket_bytes / 4);
  std::vector<GradBucket> buckets;
  std::int64_t end = total;
  // Walk the candidates from the tail: close a bucket at the first candidate that makes it big
  // enough; whatever remains at the head forms the last bucket.
  for (auto it = boundaries.rbegin(); it != boundaries.rend(); ++it) {
    if (*it >= end) continue;
    if (end - *it >= floats || *it == 0) {
      buckets.push_back({*it, end});
      end = *it;
    }
  }
  return buckets;
}

namespace {

std::vector<GradBucket> make_reducer_buckets(std::vector<std::int64_t> boundaries,
                                             std::int64_t total, std::int64_t bucket_bytes,
                                             const SparseHead& sparse) {
  if (sparse.rows == 0) return make_buckets(std::move(boundaries), total, bucket_bytes);
  CHECK(sparse.rows > 0 && sparse.width > 0, "sparse head ", sparse.rows, " x ", sparse.width);
  const std::int64_t head = sparse.rows * sparse.width;
  CHECK(head <= total, "sparse head of ", head, " floats in a buffer of ", total);
  // Dense buckets over [head, total), then the head as the last bucket.
  std::vector<std::int64_t> shifted;
  for (std::int64_t b : boundaries)
    if (b >= head) shifted.push_back(b - head);
  std::vector<GradBucket> buckets = make_buckets(std::move(shifted), total - head, bucket_bytes);
  for (GradBucket& b : buckets) {
    b.begin += head;
    b.end += head;
  }
  buckets.push_back({0, head});
  return buckets;
}

}  // namespace

GradReducer::GradReducer(Communicator& comm, std::vector<std::int64_t> boundaries,
                         std::int64_t total, std::int64_t bucket_bytes, WireDType wire,
                         SparseHead sparse)
    : comm_(comm),
      buckets_(make_reducer_buckets(std::move(boundaries), total, bucket_bytes, sparse)),
      total_(total),
      wire_(wire),
      sparse_(sparse),
      row_flags_(static_cast<std::size_t>(sparse.rows), 0.0f) {}

void GradReducer::mark_rows(const std::int32_t* ids, std::int64_t n) {
  CHECK(sparse_.rows > 0, "mark_rows without a sparse head");
  CHECK(grads_ == nullptr, "mark_rows after begin_step");
  for (std::int64_t i = 0; i < n; ++i) {
    CHECK(ids[i] >= 0 && ids[i] < sparse_.rows, "row ", ids[i], " outside [0, ", sparse_.rows, ")");
    row_flags_[static_cast<std::size_t>(ids[i])] = 1.0f;
  }
}

void GradReducer::begin_step(float* grads) {
  CHECK(grads != nullptr || total_ == 0, "begin_step: null gradient buffer");
  CHECK(handles_.empty(), "begin_step: the previous step was not finished");
  grads_ = grads;
  started_ = 0;
  last_ready_ = total_;
  payload_bytes_ = 0;
  if (sparse_.rows > 0) {
    flags_handle_ = comm_.start_allreduce(row_flags_.data(), sparse_.rows, WireDType::kF32);
    payload_bytes_ += sparse_.rows * 4;
  }
}

void GradReducer::start_bucket(std::size_t i) {
  if (sparse_.rows > 0 && i + 1 == buckets_.size()) {
    start_sparse_head();
    return;
  }
  const GradBucket& b = buckets_[i];
  handles_.push_back(comm_.start_allreduce(grads_ + b.begin, b.end - b.begin, wire_));
  payload_bytes_ += (b.end - b.begin) * (wire_ == WireDType::kBF16 ? 2 : 4);
}

void GradReducer::start_sparse_head() {
  comm_.wait(flags_handle_);  // started in begin_step: done by now
  flags_handle_ = -1;
  touched_.clear();
  for (std::int64_t r = 0; r < sparse_.rows; ++r)
    if (row_flags_[static_cast<std::size_t>(r)] > 0.0f) touched_.push_back(r);
  const std::int64_t w = sparse_.width;
  packed_.resize(touched_.size() * static_cast<std::size_t>(w));
  parallel_for(static_cast<std::int64_t>(touched_.size()), 64, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i)
      std::copy_n(grads_ + touched_[i] * w, w, packed_.data() + i * w);
  });
  // Every rank computed the same touched_ from the summed flags, so the calls match.
  handles_.push_back(touched_.empty()
                         ? -1
                         : comm_.start_allreduce(packed_.data(),
                                                 static_cast<std::int64_t>(packed_.size()), wire_));
  payload_bytes_ += static_cast<std::int64_t>(packed_.size()) * (wire_ == WireDType::kBF16 ? 2 : 4);
}

void GradReducer::finish_sparse_head(float scale, const ReducedFn& reduced) {
  const std::int64_t w = sparse_.width;
  parallel_for(static_cast<std::int64_t>(touched_.size()), 64, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      float* src = packed_.data() + i * w;
      float* dst = grads_ + touched_[i] * w;
      for (std::int64_t k = 0; k < w; ++k) dst[k] = src[k] = src[k] * scale;
    }
  });
  if (reduced && !packed_.empty())
    reduced(packed_.data(), static_cast<std::int64_t>(packed_.size()));
  std::fill(row_flags_.begin(), row_flags_.end(), 0.0f);
}

void GradReducer::ready(std::int64_t begin_offset) {
  CHECK(grads_ != nullptr || total_ == 0, "ready() before begin_step()");
  CHECK(begin_offset >= 0 && begin_offset <= last_ready_, "ready(", begin_offset, ") after ready(",
        last_ready_, "): offsets must decrease");
  last_ready_ = begin_offset;
  while (started_ < buckets_.size() && buckets_[started_].begin >= begin_offset) {
    start_bucket(started_);
    ++started_;
  }
  comm_.progress();
}

double GradReducer::finish(float scale, const ReducedFn& reduced) {
  ready(0);
  double waited = 0;
  // Wait tail first (the order they were started); scale each bucket as soon as it is back,
  // while the later ones may still be in flight.
  for (std::size_t i = 0; i < handles_.size(); ++i) {
    Timer timer;
    if (handles_[i] >= 0) comm_.wait(handles_[i]);
    waited += timer.seconds();
    if (sparse_.rows > 0 && i + 1 == buckets_.size()) {
      finish_sparse_head(scale, reduced);
      continue;
    }
    float* data = grads_ + buckets_[i].begin;
    const std::int64_t n = buckets_[i].end - buckets_[i].begin;
    if (scale != 1.0f) {
      parallel_for(n, 1 << 16, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t k = b; k < e; ++k) data[k] *= scale;
      });
    }
    if (reduced && n > 0) reduced(data, n);
  }
  handles_.clear();
  grads_ = nullptr;
  return waited;
}

}  // namespace bertfit
