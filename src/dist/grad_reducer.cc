// GradReducer: bucket formation, starting buckets as backward finishes them, and the final
// wait-and-scale.
#include "dist/grad_reducer.h"

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

GradReducer::GradReducer(Communicator& comm, std::vector<std::int64_t> boundaries,
                         std::int64_t total, std::int64_t bucket_bytes, WireDType wire)
    : comm_(comm),
      buckets_(make_buckets(std::move(boundaries), total, bucket_bytes)),
      total_(total),
      wire_(wire) {}

void GradReducer::begin_step(float* grads) {
  CHECK(grads != nullptr || total_ == 0, "begin_step: null gradient buffer");
  CHECK(handles_.empty(), "begin_step: the previous step was not finished");
  grads_ = grads;
  started_ = 0;
  last_ready_ = total_;
}

void GradReducer::ready(std::int64_t begin_offset) {
  CHECK(grads_ != nullptr || total_ == 0, "ready() before begin_step()");
  CHECK(begin_offset >= 0 && begin_offset <= last_ready_, "ready(", begin_offset, ") after ready(",
        last_ready_, "): offsets must decrease");
  last_ready_ = begin_offset;
  while (started_ < buckets_.size() && buckets_[started_].begin >= begin_offset) {
    const GradBucket& b = buckets_[started_];
    handles_.push_back(comm_.start_allreduce(grads_ + b.begin, b.end - b.begin, wire_));
    ++started_;
  }
  comm_.progress();
}

double GradReducer::finish(float scale) {
  ready(0);
  double waited = 0;
  // Wait tail first (the order they were started); scale each bucket as soon as it is back,
  // while the later ones may still be in flight.
  for (std::size_t i = 0; i < handles_.size(); ++i) {
    Timer timer;
    comm_.wait(handles_[i]);
    waited += timer.seconds();
    if (scale != 1.0f) {
      float* data = grads_ + buckets_[i].begin;
      parallel_for(buckets_[i].end - buckets_[i].begin, 1 << 16,
                   [&](std::int64_t b, std::int64_t e) {
                     for (std::int64_t k = b; k < e; ++k) data[k] *= scale;
                   });
    }
  }
  handles_.clear();
  grads_ = nullptr;
  return waited;
}

}  // namespace bertfit
