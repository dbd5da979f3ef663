// GradReducer: averages the flat gradient buffer across ranks, overlapping the all-reduce with
// the rest of backward. The buffer is cut into contiguous buckets taken from the tail (backward
// produces gradients from the last layer to the first); each bucket is all-reduced as soon as
// the caller reports it final through ready(), and finish() waits for all of them and scales.
//
// Progress (CommOptions::progress): by default a communication thread moves the buckets while
// the caller computes, yielding between polls; testing between layers is the alternative. The
// thread exposed less wait at equal or lower overhead, buckets of 4-12 MB the least (the last
// bucket started is exposed whole: keep it small; in a real model it is the embeddings). The
// measurements are in docs/DESIGN.md ("Measurements", data-parallel training). Each bucket is
// one MPI_Iallreduce (Open MPI's own algorithms; the ring for the non-blocking all-reduce:
// comm/mpi_runtime.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "comm/communicator.h"

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

// Optional row-sparse head of the buffer: a table of `rows` rows of `width` floats at offset 0
// (the word embeddings) whose gradient is non-zero only in the rows a batch touched. Instead
// of the whole table (94 MB for DistilBERT's vocabulary, and the last bucket backward
// finishes, so never overlapped), the reducer sums a per-row flag vector (started in
// begin_step, long done when needed) and then all-reduces only the rows some rank touched,
// packed contiguously: about 1-5 MB for a batch of 32 sentences. Rows no rank touched are zero
// on every rank and so already hold their sum. The caller promises that unmarked rows of its
// gradient are exactly zero.
struct SparseHead {
  std::int64_t rows = 0;
  std::int64_t width = 0;
};

class GradReducer {
 public:
  // boundaries: candidate split points (offsets into the buffer, e.g. the start of each layer)
  // from which buckets of about bucket_bytes are formed; total: buffer length in floats.
  // sparse: see SparseHead (rows == 0: none); its end is always a bucket boundary.
  GradReducer(Communicator& comm, std::vector<std::int64_t> boundaries, std::int64_t total,
              std::int64_t bucket_bytes, WireDType wire, SparseHead sparse = {});

  // Sparse head only: the rows this rank's batch touches, for every micro-batch of the step,
  // before begin_step of its last micro-step.
  void mark_rows(const std::int32_t* ids, std::int64_t n);
  void begin_step(float* grads);          // before backward of the last micro-step
  void ready(std::int64_t begin_offset);  // everything in [begin_offset, total) is final
  // Starts what is left, waits for every bucket, scales the result by `scale` (e.g. 1/world)
  // so grads hold the average; returns seconds spent waiting (exposed communication).
  // `reduced`, when given, is called on each part of the buffer as soon as it holds its final
  // values, while later buckets may still be in flight, so that the caller can use the wait
  // (the trainer sums the squares for gradient clipping there). The parts cover every nonzero
  // entry once (of the sparse head only the touched rows, packed: the rest is zero), in an
  // order that is the same on every rank.
  using ReducedFn = std::function<void(const float* data, std::int64_t n)>;
  double finish(float scale, const ReducedFn& reduced = {});

  const std::vector<GradBucket>& buckets() const { return buckets_; }
  std::int64_t total() const { return total_; }
  WireDType wire() const { return wire_; }
  // Bytes one rank contributed to the all-reduces of the last finished step (the payload, not
  // what the all-reduce algorithm moves; with a sparse head only the rows some rank touched, plus
  // their flags).
  std::int64_t payload_bytes() const { return payload_bytes_; }

 private:
  Communicator& comm_;
  std::vector<GradBucket> buckets_;
  std::int64_t total_;
  WireDType wire_;
  float* grads_ = nullptr;
  std::size_t started_ = 0;      // buckets_[0, started_) are in flight
  std::int64_t last_ready_ = 0;  // for the monotonicity check
  std::vector<Communicator::Handle> handles_;
  // Sparse head (sparse_.rows > 0): buckets_.back() is [0, rows * width) and is reduced as the
  // packed rows listed in touched_.
  SparseHead sparse_;
  std::vector<float> row_flags_;  // per row: > 0 when some rank touched it (after the sum)
  std::vector<std::int64_t> touched_;
  std::vector<float> packed_;
  Communicator::Handle flags_handle_ = -1;
  std::int64_t payload_bytes_ = 0;

  void start_bucket(std::size_t i);
  void start_sparse_head();
  void finish_sparse_head(float scale, const ReducedFn& reduced);
};

}  // namespace bertfit
