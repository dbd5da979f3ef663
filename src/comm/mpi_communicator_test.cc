// MPI communicator and GradReducer across real ranks; run by ctest as
// `mpirun -np 2 comm_mpi_test` (see CMakeLists.txt), every test in both progress modes.
// Values are chosen from per-rank seeds, so each rank can compute what every other rank
// contributed and check the result exactly or within an argued tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>

#include "base/dtype.h"
#include "base/error.h"
#include "comm/communicator.h"
#include "comm/grad_reducer.h"

namespace bertfit {
namespace {

std::vector<float> values_of(int rank, std::int64_t n, std::uint32_t salt) {
  std::mt19937 rng(1000u * salt + static_cast<std::uint32_t>(rank));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

class MpiTest : public ::testing::TestWithParam<ProgressMode> {
 protected:
  void SetUp() override {
    CommOptions options;
    options.progress = GetParam();
    options.timeout_seconds = 20;  // a failing rank must not hang the suite
    comm_ = make_communicator(options);
    ASSERT_EQ(comm_->world(), 2) << "run under mpirun -np 2";
    ASSERT_NE(comm_->backend().find(progress_mode_name(options.progress)), std::string::npos)
        << comm_->backend();
  }
  // Every rank holds bitwise the same buffer (data parallelism depends on it).
  void expect_identical_on_all_ranks(std::vector<float> data) {
    std::vector<float> root = data;
    comm_->broadcast(root.data(), static_cast<std::int64_t>(root.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(root.data(), data.data(), data.size() * sizeof(float)), 0);
  }
  std::unique_ptr<Communicator> comm_;
};

TEST_P(MpiTest, Identity) {
  // Local rank and size agree with the host names (ranks on one host, or emulated nodes of
  // scripts/cluster, each with its own host name): gather a small hash of each rank's host.
  auto hash =
      static_cast<float>(std::hash<std::string>{}(comm_->host()) % (1u << 20));  // exact in fp32
  std::vector<float> hosts = comm_->allgatherv({hash});
  ASSERT_EQ(hosts.size(), 2u);
  int same = 0, before = 0;
  for (int r = 0; r < 2; ++r) {
    same += hosts[static_cast<std::size_t>(r)] == hash;
    before += r < comm_->rank() && hosts[static_cast<std::size_t>(r)] == hash;
  }
  EXPECT_EQ(comm_->local_world(), same);
  EXPECT_EQ(comm_->local_rank(), before);
  std::string text = describe(*comm_);
  EXPECT_NE(text.find("of 2"), std::string::npos) << text;
  EXPECT_NE(text.find("MPI ("), std::string::npos) << text;
}

TEST_P(MpiTest, AllreduceSumF32AndF64) {
  const int rank = comm_->rank();
  std::vector<float> f = {1.0f + rank, 0.5f, -3.0f * rank, 1e-3f};
  comm_->allreduce_sum(f.data(), static_cast<std::int64_t>(f.size()));
  EXPECT_EQ(f, (std::vector<float>{3.0f, 1.0f, -3.0f, 2e-3f}));
  std::vector<double> d = {1e16 * (rank + 1), 0.25, static_cast<double>(rank)};
  comm_->allreduce_sum(d.data(), 3);
  EXPECT_EQ(d, (std::vector<double>{3e16, 0.5, 1.0}));
  comm_->allreduce_sum(static_cast<float*>(nullptr), 0);  // empty is fine
}

TEST_P(MpiTest, Broadcast) {
  std::string text = comm_->rank() == 1 ? "from rank one" : "xxxxxxxxxxxxx";
  comm_->broadcast(text.data(), static_cast<std::int64_t>(text.size()), 1);
  EXPECT_EQ(text, "from rank one");
  comm_->barrier();
}

TEST_P(MpiTest, AllgathervUnevenSizes) {
  // rank 0 sends 3 values, rank 1 sends none, then the reverse with 1.
  std::vector<float> mine = comm_->rank() == 0 ? std::vector<float>{1, 2, 3} : std::vector<float>{};
  EXPECT_EQ(comm_->allgatherv(mine), (std::vector<float>{1, 2, 3}));
  mine = comm_->rank() == 0 ? std::vector<float>{7} : std::vector<float>{8, 9};
  EXPECT_EQ(comm_->allgatherv(mine), (std::vector<float>{7, 8, 9}));
}

TEST_P(MpiTest, StartAllreduceF32IsExact) {
  const std::int64_t n = 100003;  // odd, several MPI segments
  std::vector<float> mine = values_of(comm_->rank(), n, 1);
  std::vector<float> a = values_of(0, n, 1), b = values_of(1, n, 1);
  auto h = comm_->start_allreduce(mine.data(), n, WireDType::kF32);
  comm_->progress();
  comm_->wait(h);
  // Two ranks: each element is one fp32 addition, a + b == b + a exactly.
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(mine[i], a[i] + b[i]) << i;
  expect_identical_on_all_ranks(mine);
}

TEST_P(MpiTest, StartAllreduceBf16) {
  const std::int64_t n = 65537;
  std::vector<float> mine = values_of(comm_->rank(), n, 2);
  std::vector<float> a = values_of(0, n, 2), b = values_of(1, n, 2);
  std::vector<float> f32 = mine;
  auto h16 = comm_->start_allreduce(mine.data(), n, WireDType::kBF16);
  auto h32 = comm_->start_allreduce(f32.data(), n, WireDType::kF32);
  comm_->wait(h32);
  comm_->wait(h16);
  // Tolerance: bf16 keeps 8 significant bits, so rounding to nearest has unit roundoff
  // u = 2^-8. Each input is rounded at most once (error <= u|x_i|) and each of the world-1
  // additions rounds the partial sum (error <= u * sum|x_i| to first order), so
  // |result - exact| <= world * u * sum|x_i| * (1 + 2u). With 2 ranks: 2^-7 (|a|+|b|)(1+2^-7).
  const double u = std::ldexp(1.0, -8);
  auto bf16 = [](float x) { return bf16_to_f32(f32_to_bf16(x)); };
  int inexact = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    double exact = static_cast<double>(a[i]) + b[i];
    double bound = 2 * u * (std::fabs(a[i]) + std::fabs(b[i])) * (1 + 2 * u);
    ASSERT_LE(std::fabs(mine[i] - exact), bound) << i;
    // The values really crossed the wire as bf16: the low 16 bits are zero ...
    ASSERT_EQ(std::bit_cast<std::uint32_t>(mine[i]) & 0xffffu, 0u) << i;
    // ... and with 2 ranks the result is exactly one bf16 addition of both rounded inputs
    // (the bf16 operator: comm/mpi_runtime.h).
    ASSERT_EQ(mine[i], bf16(bf16(a[i]) + bf16(b[i]))) << i;
    inexact += mine[i] != f32[i];
  }
  EXPECT_GT(inexact, n / 2);  // the fp32 wire really was different (exact to fp32)
  expect_identical_on_all_ranks(mine);
}

// End to end: random candidate boundaries, ready() in decreasing order with progress between,
// several steps reusing the reducer, both wire types.
TEST_P(MpiTest, GradReducerAveragesAcrossRanks) {
  std::mt19937 rng(42);  // same on both ranks: same boundaries and ready() sequence
  for (WireDType wire : {WireDType::kF32, WireDType::kBF16}) {
    const std::int64_t total = 200000 + rng() % 1000;
    std::vector<std::int64_t> boundaries;
    for (int i = 0; i < 40; ++i) boundaries.push_back(static_cast<std::int64_t>(rng() % total));
    GradReducer reducer(*comm_, boundaries, total, 64 * 1024, wire);
    ASSERT_GT(reducer.buckets().size(), 3u);
    for (std::uint32_t step = 0; step < 3; ++step) {
      std::vector<float> grads = values_of(comm_->rank(), total, 10 + step);
      std::vector<float> a = values_of(0, total, 10 + step), b = values_of(1, total, 10 + step);
      reducer.begin_step(grads.data());
      std::int64_t offset = total;
      while (offset > 0) {
        offset = std::max<std::int64_t>(0, offset - static_cast<std::int64_t>(rng() % 30000));
        reducer.ready(offset);
        comm_->progress();
      }
      double waited = reducer.finish(0.5f);
      EXPECT_GE(waited, 0.0);
      for (std::int64_t i = 0; i < total; ++i) {
        if (wire == WireDType::kF32) {
          ASSERT_EQ(grads[i], (a[i] + b[i]) * 0.5f) << i;  // one addition, exact halving
        } else {
          // Same bound as StartAllreduceBf16, halved by the scale (exact).
          double exact = (static_cast<double>(a[i]) + b[i]) * 0.5;
          double bound = std::ldexp(1.0, -7) * (std::fabs(a[i]) + std::fabs(b[i])) * 0.5 *
                         (1 + std::ldexp(1.0, -7));
          ASSERT_LE(std::fabs(grads[i] - exact), bound) << i;
        }
      }
      expect_identical_on_all_ranks(grads);
    }
  }
}

TEST_P(MpiTest, ManyOutstandingWaitedOutOfOrder) {
  std::vector<std::vector<float>> buffers;
  std::vector<Communicator::Handle> handles;
  for (int k = 0; k < 16; ++k)
    buffers.push_back(std::vector<float>(1000 + 37 * k, static_cast<float>(comm_->rank() + k)));
  for (auto& buffer : buffers)
    handles.push_back(comm_->start_allreduce(
        buffer.data(), static_cast<std::int64_t>(buffer.size()), WireDType::kF32));
  for (int k = 15; k >= 0; --k) comm_->wait(handles[static_cast<std::size_t>(k)]);
  for (int k = 0; k < 16; ++k) {
    for (float x : buffers[static_cast<std::size_t>(k)])
      ASSERT_EQ(x, static_cast<float>(1 + 2 * k));
  }
}

// The set-up vote (agree_on_setup): nothing to do when no rank failed; JobError with the
// message on every rank when all failed alike; otherwise each failed rank's own Error naming it,
// and on the others JobError naming the failed ranks.
TEST_P(MpiTest, SetupVote) {
  const int rank = comm_->rank();
  auto outcome = [&](const std::string& error) -> std::string {
    try {
      agree_on_setup(*comm_, error);
      return "ok";
    } catch (const JobError& e) {
      return std::string("job: ") + e.what();
    } catch (const Error& e) {
      return std::string("rank: ") + e.what();
    }
  };
  EXPECT_EQ(outcome(""), "ok");
  EXPECT_EQ(outcome("--lr differs"), "job: --lr differs");
  EXPECT_EQ(outcome(rank == 1 ? "no such file" : ""),
            rank == 1 ? "rank: rank 1: no such file" : "job: the set-up failed on rank(s) 1");
  EXPECT_EQ(outcome(rank == 0 ? "a" : "b"), rank == 0 ? "rank: rank 0: a" : "rank: rank 1: b");
  // Still usable afterwards: the vote left nothing outstanding.
  std::vector<double> one = {1.0};
  comm_->allreduce_sum(one.data(), 1);
  EXPECT_EQ(one[0], 2.0);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, MpiTest, ::testing::Values(ProgressMode::kTestBetweenLayers, ProgressMode::kCommThread),
    [](const auto& info) {
      return std::string(info.param == ProgressMode::kCommThread ? "CommThread"
                                                                 : "TestBetweenLayers");
    });

}  // namespace
}  // namespace bertfit
