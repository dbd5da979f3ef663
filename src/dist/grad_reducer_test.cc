// GradReducer without MPI: bucket formation from candidate boundaries, buckets started as soon
// as ready() covers them (checked with a recording communicator), and world-1 equivalence to
// plain scaling.
#include "dist/grad_reducer.h"

#include <gtest/gtest.h>

#include <random>

#include "dist/local_communicator.h"

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
  double waited = reducer.finish(0.5f);  // starts the rest
  ASSERT_EQ(comm.starts.size(), 5u);
  EXPECT_EQ(comm.starts[4].offset, 0);
  EXPECT_GE(waited, 0.0);
  for (float g : grads) ASSERT_EQ(g, 0.5f);
  EXPECT_EQ(reducer.payload_bytes(), 2000);
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
}

}  // namespace
}  // namespace bertfit
