// GradReducer without MPI: bucket formation from candidate boundaries, buckets started as soon
// as ready() covers them (checked with a recording communicator), and world-1 equivalence to
// plain scaling.
#include "comm/grad_reducer.h"

#include <gtest/gtest.h>

#include <random>

#include "comm/local_communicator.h"

namespace bertfit {
namespace {

// A 1-rank communicator that records when each all-reduce starts and is waited for.
class RecordingCommunicator : public LocalCommunicator {
 public:
  struct Start {
    std::int64_t offset, n;
    WireDType wire;
  };
  Handle start_allreduce(float* data, std::int64_t n, WireDType wire) override {
    starts.push_back({data - base, n, wire});
    return LocalCommunicator::start_allreduce(data, n, wire);
  }
  void progress() override { ++progress_calls; }
  float* base = nullptr;
  std::vector<Start> starts;
  int progress_calls = 0;
};

void expect_valid_buckets(const std::vector<GradBucket>& buckets,
                          const std::vector<std::int64_t>& candidates, std::int64_t total,
                          std::int64_t bucket_bytes) {
  std::int64_t end = total;
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const GradBucket& b = buckets[i];
    EXPECT_EQ(b.end, end) << "bucket " << i << " is not contiguous with the previous one";
    EXPECT_LT(b.begin, b.end);
    bool is_candidate = b.begin == 0 || std::find(candidates.begin(), candidates.end(), b.begin) !=
                                            candidates.end();
    EXPECT_TRUE(is_candidate) << "bucket " << i << " starts at " << b.begin << ", not a candidate";
    if (b.begin != 0) {
      EXPECT_GE((b.end - b.begin) * 4, bucket_bytes) << "bucket " << i;
    }
    end = b.begin;
  }
  EXPECT_EQ(end, 0) << "buckets do not reach offset 0";
}

TEST(MakeBuckets, TailFirstAtCandidates) {
  // Layers of 100 floats at 0, 100, ..., 900; 800-byte buckets hold two layers each.
  std::vector<std::int64_t> starts;
  for (int i = 0; i < 10; ++i) starts.push_back(100 * i);
  auto buckets = make_buckets(starts, 1000, 800);
  ASSERT_EQ(buckets.size(), 5u);
  EXPECT_EQ(buckets[0].begin, 800);
  EXPECT_EQ(buckets[0].end, 1000);
  EXPECT_EQ(buckets[4].begin, 0);
  EXPECT_EQ(buckets[4].end, 200);
  expect_valid_buckets(buckets, starts, 1000, 800);
  // Huge buckets: one; tiny buckets: one per layer.
  EXPECT_EQ(make_buckets(starts, 1000, 1 << 30).size(), 1u);
  EXPECT_EQ(make_buckets(starts, 1000, 4).size(), 10u);
  EXPECT_TRUE(make_buckets({}, 0, 1024).empty());
  EXPECT_EQ(make_buckets({}, 7, 4).size(), 1u);  // no candidates: the whole buffer
}

TEST(MakeBuckets, RandomCandidates) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::int64_t total = 1 + rng() % 5000;
    std::vector<std::int64_t> candidates;
    int k = static_cast<int>(rng() % 30);
    for (int i = 0; i < k; ++i)
      candidates.push_back(static_cast<std::int64_t>(rng() % (total + 1)));
    std::int64_t bytes = 4 + rng() % 8000;
    expect_valid_buckets(make_buckets(candidates, total, bytes), candidates, total, bytes);
  }
}

TEST(GradReducer, StartsBucketsWhenReady) {
  RecordingCommunicator comm;
  std::vector<float> grads(1000, 1.0f);
  comm.base = grads.data();
  std::vector<std::int64_t> starts = {0, 100, 200, 300, 400, 500, 600, 700, 800, 900};
  GradReducer reducer(comm, starts, 1000, 800, WireDType::kBF16);
  reducer.begin_step(grads.data());
  reducer.ready(900);  // half of the tail bucket [800, 1000): nothing starts
  EXPECT_TRUE(comm.starts.empty());
  reducer.ready(800);
  ASSERT_EQ(comm.starts.size(), 1u);
  EXPECT_EQ(comm.starts[0].offset, 800);
  EXPECT_EQ(comm.starts[0].n, 200);
  EXPECT_EQ(comm.starts[0].wire, WireDType::kBF16);
  reducer.ready(350);  // covers [400, 800): two more buckets
  EXPECT_EQ(comm.starts.size(), 3u);
  EXPECT_EQ(comm.progress_calls, 3);
  std::int64_t reduced = 0;  // the parts reported final: every float once, already scaled
  double waited = reducer.finish(0.5f, [&](const float* d, std::int64_t n) {  // starts the rest
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(d[i], 0.5f);
    reduced += n;
  });
  EXPECT_EQ(reduced, 1000);
  ASSERT_EQ(comm.starts.size(), 5u);
  EXPECT_EQ(comm.starts[4].offset, 0);
  EXPECT_GE(waited, 0.0);
  for (float g : grads) ASSERT_EQ(g, 0.5f);
  EXPECT_EQ(reducer.payload_bytes(), 2000);
}

TEST(GradReducer, SparseHeadSendsOnlyTouchedRows) {
  // A 10 x 4 table at the head of a 100-float buffer; the batch touches rows 2, 7 and 2 again
  // across two micro-batches.
  RecordingCommunicator comm;
  std::vector<float> grads(100, 0.0f);
  comm.base = grads.data();
  GradReducer reducer(comm, {20, 60}, 100, 4, WireDType::kF32, SparseHead{10, 4});
  // The head's end (40) is a bucket boundary even though it is not a candidate.
  ASSERT_EQ(reducer.buckets().back().begin, 0);
  ASSERT_EQ(reducer.buckets().back().end, 40);
  for (int step = 0; step < 2; ++step) {
    comm.starts.clear();
    std::fill(grads.begin(), grads.end(), 0.0f);
    const std::int32_t first[] = {2, 7}, second[] = {2};
    reducer.mark_rows(first, 2);
    reducer.mark_rows(second, 1);
    for (int k = 0; k < 4; ++k) grads[2 * 4 + k] = grads[7 * 4 + k] = 1.0f + k;
    for (int i = 40; i < 100; ++i) grads[i] = 1.0f;
    reducer.begin_step(grads.data());
    reducer.ready(60);
    reducer.ready(40);
    const std::size_t dense_starts = comm.starts.size();
    // The parts reported final hold every nonzero entry once (the head's touched rows packed):
    // their count, sum and sum of squares are those of the final buffer.
    std::int64_t parts = 0;
    double sum = 0, squares = 0;
    reducer.finish(0.5f, [&](const float* d, std::int64_t n) {
      parts += n;
      for (std::int64_t i = 0; i < n; ++i) sum += d[i], squares += d[i] * d[i];
    });
    EXPECT_EQ(parts, 60 + 8);
    double want_sum = 0, want_squares = 0;
    for (float g : grads) want_sum += g, want_squares += g * g;
    EXPECT_EQ(sum, want_sum);
    EXPECT_EQ(squares, want_squares);
    // The flags (10 floats, not in grads), the dense buckets, then 2 packed rows of 4.
    ASSERT_EQ(comm.starts.size(), dense_starts + 1);
    EXPECT_EQ(comm.starts.back().n, 8);
    std::int64_t dense = 0;
    for (const auto& st : comm.starts)
      if (st.offset >= 40 && st.offset < 100) dense += st.n;
    EXPECT_EQ(dense, 60);
    for (int r = 0; r < 10; ++r)
      for (int k = 0; k < 4; ++k)
        ASSERT_EQ(grads[r * 4 + k], (r == 2 || r == 7) ? 0.5f * (1.0f + k) : 0.0f) << r;
    for (int i = 40; i < 100; ++i) ASSERT_EQ(grads[i], 0.5f);
    EXPECT_EQ(reducer.payload_bytes(), (10 + 60 + 8) * 4);
  }
}

TEST(GradReducer, WorldOneEqualsScaling) {
  LocalCommunicator comm;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t total = 12345;
  std::vector<float> grads(total), expected(total);
  for (int step = 0; step < 3; ++step) {
    for (std::int64_t i = 0; i < total; ++i) expected[i] = (grads[i] = normal(rng)) * 0.25f;
    GradReducer reducer(comm, {1000, 5000, 9000, 12000}, total, 4096, WireDType::kF32);
    reducer.begin_step(grads.data());
    for (std::int64_t offset : {12000, 9000, 5000, 1000}) reducer.ready(offset);
    reducer.finish(0.25f);
    ASSERT_EQ(grads, expected);
  }
}

TEST(GradReducer, MisuseIsAProgrammingError) {
  LocalCommunicator comm;
  std::vector<float> grads(100);
  GradReducer reducer(comm, {50}, 100, 64, WireDType::kF32);
  EXPECT_DEATH(reducer.ready(10), "before begin_step");
  reducer.begin_step(grads.data());
  reducer.ready(50);
  EXPECT_DEATH(reducer.ready(60), "offsets must decrease");
  EXPECT_DEATH(reducer.begin_step(grads.data()), "not finished");
  reducer.finish(1.0f);
  const std::int32_t ids[] = {3};
  EXPECT_DEATH(reducer.mark_rows(ids, 1), "without a sparse head");
  GradReducer sparse(comm, {}, 100, 64, WireDType::kF32, SparseHead{10, 5});
  const std::int32_t bad[] = {10};
  EXPECT_DEATH(sparse.mark_rows(bad, 1), "outside");
}

}  // namespace
}  // namespace bertfit
