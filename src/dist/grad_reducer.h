// GradReducer: averages the flat gradient buffer across ranks, overlapping the all-reduce with
// the rest of backward. The buffer is cut into contiguous buckets taken from the tail (backward
// produces gradients from the last layer to the first); each bucket is all-reduced as soon as
// the caller reports it final through ready(), and finish() waits for all of them and scales.
//
// Progress mode (CommOptions::progress), measured with src/dist/overlap_bench.cc:
// MEASUREMENTS_PLACEHOLDER
#pragma once

#include <cstdint>
#include <vector>

#include "dist/communicator.h"

namespace bertfit {

// One bucket: gradient span [begin, end) of the flat buffer.
struct GradBucket {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

// Cuts [0, total) into buckets of at least bucket_bytes (fp32 bytes of the span), using only
// the candidate boundaries as cut points, walking from the tail; returned tail first. A bucket
// may be larger than bucket_bytes when the candidates are sparse; the head bucket may be smaller.
std::vector<GradBucket> make_buckets(std::vector<std::int64_t> boundaries, std::int64_t total,
                                     std::int64_t bucket_bytes);

class GradReducer {
 public:
  // boundaries: candidate split points (offsets into the buffer, e.g. the start of each layer)
  // from which buckets of about bucket_bytes are formed; total: buffer length in floats.
  GradReducer(Communicator& comm, std::vector<std::int64_t> boundaries, std::int64_t total,
              std::int64_t bucket_bytes, WireDType wire);

  void begin_step(float* grads);          // before backward of the last micro-step
  void ready(std::int64_t begin_offset);  // everything in [begin_offset, total) is final
  // Starts what is left, waits for every bucket, scales the result by `scale` (e.g. 1/world)
  // so grads hold the average; returns seconds spent waiting (exposed communication).
  double finish(float scale);

  const std::vector<GradBucket>& buckets() const { return buckets_; }
  std::int64_t total() const { return total_; }
  WireDType wire() const { return wire_; }
  // Bytes one rank contributes to the all-reduces of a step (the payload, not ring traffic).
  std::int64_t payload_bytes() const { return total_ * (wire_ == WireDType::kBF16 ? 2 : 4); }

 private:
  Communicator& comm_;
  std::vector<GradBucket> buckets_;
  std::int64_t total_;
  WireDType wire_;
  float* grads_ = nullptr;
  std::size_t started_ = 0;          // buckets_[0, started_) are in flight
  std::int64_t last_ready_ = 0;      // for the monotonicity check
  std::vector<Communicator::Handle> handles_;
};

}  // namespace bertfit
