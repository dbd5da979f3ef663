// GradReducer: averages the flat gradient buffer across ranks, overlapping the all-reduce with
// the rest of backward. The buffer is cut into contiguous buckets taken from the tail (backward
// produces gradients from the last layer to the first); each bucket is all-reduced as soon as
// the caller reports it final through ready(), and finish() waits for all of them and scales.
//
// Progress mode (CommOptions::progress): measured with `comm_bench overlap`
// (comm_bench.cc) on 2 emulated nodes of scripts/cluster (1 core each, links shaped to 1 Gbit/s
// each way) on the 2-core development machine, which other jobs shared; medians of 3-8 rounds in
// which the configurations take turns. overhead = step time minus the same compute without
// communication; wait = exposed wait in finish(); compute is one thread with one progress()
// call per bucket; all-reduce = the same buckets with no compute. Times in ms.
//
//   buffer, buckets, compute per bucket (all-reduce)   test between layers   comm thread (yield)
//                                                       overhead    wait      overhead    wait
//   66 MB, 16 x 4 MB, 60 ms (561)                          356        61         383        36
//   66 MB, 16 x 4 MB, 25 ms (567)                          328       136         298        65
//   264 MB, 4 x 66 MB, 825 ms (2164)                      1202       683        1142       539
//   264 MB, 11 x 24 MB, 300 ms (2153), two runs      1532, 953  642, 610   924, 668  239, 209
//   264 MB, 22 x 12 MB, 150 ms (2151)                      708       393         471        77
//   264 MB, 66 x 4 MB, 50 ms (2146), two runs        1512, 478   71, 160   148, 561    21, 19
//   264 MB, 11 x 24 MB, 300 ms, bf16 wire (1215)           727       120         690       107
//   A comm thread sleeping 50 / 200 us between polls instead of yielding: 66 MB at 25 ms:
//   415/42 and 283/31; 264 MB in 11 buckets: 1391/290 and 1245/312.
//
// 264 MB is DistilBERT's fp32 gradient (66 M parameters). Why the comm thread: with buckets
// whose ring rounds fit in the kernel's socket buffers (4 MB buckets, 2 MB rounds) data keeps
// flowing between progress() calls, so testing between layers is competitive; with larger
// buckets a round outgrows the socket buffers and stalls until the next progress() call, and
// progress() itself spends the caller's time moving data. The comm thread exposed 1.1-8x less
// wait, at equal or lower overhead within this machine's noise. Yielding between polls beat
// sleeping; our reading: a yielding thread runs briefly between the compute thread's slices,
// while a sleeping one wakes (preempting compute) thousands of times a second. Default:
// kCommThread, poll_interval_us = 0. Buckets of 4-12 MB exposed least (the last bucket started is
// exposed whole: keep it small; in a real model it is the embeddings).
//
// These measurements predate the TCP ring (tcp_ring.h), which now carries the buckets by
// default on its own thread; the progress mode matters for them only with
// --grad-transport mpi (and for the other, small collectives).
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
  // ring traffic; with a sparse head only the rows some rank touched, plus their flags).
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
