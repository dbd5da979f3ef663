// TcpRing without MPI: W rings in one process (one thread per rank) over loopback.
#include "comm/tcp_ring.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <future>
#include <memory>
#include <random>

#include "base/dtype.h"
#include "base/error.h"

namespace bertfit {
namespace {

struct Ring {
  std::vector<std::unique_ptr<TcpRing>> ranks;
};

Ring connect_ring(int world, double timeout = 20) {
  Ring ring;
  std::vector<std::uint8_t> all;
  for (int r = 0; r < world; ++r) {
    ring.ranks.push_back(std::make_unique<TcpRing>(r, world));
    std::vector<std::uint8_t> a = ring.ranks.back()->address();
    all.insert(all.end(), a.begin(), a.end());
  }
  std::vector<std::future<void>> connected;
  for (auto& rank : ring.ranks) {
    connected.push_back(std::async(
        std::launch::async, [&rank, &all, timeout] { rank->connect(all, 0x1234, timeout); }));
  }
  for (auto& c : connected) c.get();  // rethrows a connect error
  return ring;
}

// Starts one all-reduce per rank; the futures yield each rank's error ("" on success).
std::vector<std::future<std::string>> start_all(Ring& ring, std::vector<std::vector<float>>& data,
                                                WireDType wire) {
  std::vector<std::future<std::string>> done;
  for (std::size_t r = 0; r < ring.ranks.size(); ++r) {
    auto promise = std::make_shared<std::promise<std::string>>();
    done.push_back(promise->get_future());
    ring.ranks[r]->start(data[r].data(), static_cast<std::int64_t>(data[r].size()), wire,
                         [promise](const std::string& error) { promise->set_value(error); });
  }
  return done;
}

std::vector<std::vector<float>> random_data(int world, std::size_t n, bool exact,
                                            std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(-64, 64);
  std::vector<std::vector<float>> data(static_cast<std::size_t>(world), std::vector<float>(n));
  for (auto& v : data) {
    for (float& x : v) x = exact ? static_cast<float>(small(rng)) / 8 : normal(rng);
  }
  return data;
}

void expect_identical(const std::vector<std::vector<float>>& data) {
  if (data[0].empty()) return;  // memcmp must not see the null data() of an empty vector
  for (std::size_t r = 1; r < data.size(); ++r) {
    ASSERT_EQ(std::memcmp(data[r].data(), data[0].data(), data[0].size() * sizeof(float)), 0)
        << "rank " << r << " differs from rank 0";
  }
}

class TcpRingTest : public ::testing::TestWithParam<int> {};

TEST_P(TcpRingTest, SumsExactlyWhereTheSumIsExactAndEveryRankAgrees) {
  const int world = GetParam();
  Ring ring = connect_ring(world);
  // Lengths around the chunking: empty, fewer elements than ranks, not divisible by the ranks,
  // and several staging pieces (256 KB = 65536 floats) per chunk.
  for (std::size_t n : {0u, 1u, 3u, 5u, 1000u, 65536u * 3 + 7}) {
    auto data = random_data(world, n, true, static_cast<std::uint32_t>(n));
    std::vector<float> expected(n, 0.0f);
    for (const auto& v : data) {
      for (std::size_t i = 0; i < n; ++i) expected[i] += v[i];  // exact: multiples of 1/8
    }
    for (auto& f : start_all(ring, data, WireDType::kF32)) ASSERT_EQ(f.get(), "");
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(data[0][i], expected[i]) << "n=" << n << " " << i;
    expect_identical(data);
  }
}

TEST_P(TcpRingTest, RandomValuesWithinRoundingAndIdentical) {
  const int world = GetParam();
  Ring ring = connect_ring(world);
  const std::size_t n = 200003;
  auto data = random_data(world, n, false, 7);
  std::vector<double> exact(n, 0.0), magnitude(n, 0.0);
  for (const auto& v : data) {
    for (std::size_t i = 0; i < n; ++i) exact[i] += v[i], magnitude[i] += std::fabs(v[i]);
  }
  for (auto& f : start_all(ring, data, WireDType::kF32)) ASSERT_EQ(f.get(), "");
  // world - 1 fp32 additions, each off by at most half an ulp of a partial sum.
  const double u = std::ldexp(1.0, -24);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_LE(std::fabs(data[0][i] - exact[i]), (world - 1) * u * magnitude[i] * 1.01) << i;
  }
  expect_identical(data);
}

TEST_P(TcpRingTest, Bf16WireRoundsOncePerHopAndIsIdentical) {
  const int world = GetParam();
  Ring ring = connect_ring(world);
  const std::size_t n = 150001;
  auto data = random_data(world, n, false, 11);
  auto inputs = data;
  for (auto& f : start_all(ring, data, WireDType::kBF16)) ASSERT_EQ(f.get(), "");
  // Chunk c (of `world`, cut as the ring cuts) starts at rank c, rounded to bf16, and passes
  // ranks c+1, c+2, ... in turn, each adding its own fp32 value and rounding the sum once:
  // world roundings, each off by at most u = 2^-8 of a partial sum, and no partial sum exceeds
  // the sum of magnitudes. Every rank ends with the last rank's rounded sum.
  const double u = std::ldexp(1.0, -8);
  for (int c = 0; c < world; ++c) {
    const std::size_t begin = n * static_cast<std::size_t>(c) / static_cast<std::size_t>(world);
    const std::size_t end = n * static_cast<std::size_t>(c + 1) / static_cast<std::size_t>(world);
    for (std::size_t i = begin; i < end; ++i) {
      float partial = bf16_to_f32(f32_to_bf16(inputs[static_cast<std::size_t>(c)][i]));
      for (int k = 1; k < world; ++k) {
        const float mine = inputs[static_cast<std::size_t>((c + k) % world)][i];
        partial = bf16_to_f32(f32_to_bf16(partial + mine));
      }
      ASSERT_EQ(data[0][i], partial) << "chunk " << c << ", element " << i;
      double exact = 0, magnitude = 0;
      for (const auto& v : inputs) exact += v[i], magnitude += std::fabs(v[i]);
      ASSERT_LE(std::fabs(data[0][i] - exact), world * u * magnitude * 1.01) << i;
    }
  }
  expect_identical(data);
}

TEST_P(TcpRingTest, QueuedAllReducesCompleteInOrder) {
  const int world = GetParam();
  Ring ring = connect_ring(world);
  std::vector<std::vector<std::vector<float>>> buffers;
  std::vector<std::vector<std::future<std::string>>> done;
  for (int k = 0; k < 12; ++k) {
    buffers.push_back(random_data(world, 5000 + 999 * static_cast<std::size_t>(k), true,
                                  static_cast<std::uint32_t>(100 + k)));
  }
  auto expected = buffers;
  for (int k = 0; k < 12; ++k) {
    done.push_back(start_all(ring, buffers[static_cast<std::size_t>(k)],
                             k % 3 == 2 ? WireDType::kBF16 : WireDType::kF32));
  }
  for (int k = 0; k < 12; ++k) {
    auto& b = buffers[static_cast<std::size_t>(k)];
    for (auto& f : done[static_cast<std::size_t>(k)]) ASSERT_EQ(f.get(), "");
    if (k % 3 == 2) continue;  // bf16: covered above
    const auto& in = expected[static_cast<std::size_t>(k)];
    for (std::size_t i = 0; i < b[0].size(); ++i) {
      float sum = 0;
      for (const auto& v : in) sum += v[i];
      ASSERT_EQ(b[0][i], sum) << "all-reduce " << k << " element " << i;
    }
    expect_identical(b);
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, TcpRingTest, ::testing::Values(2, 3, 4));

TEST(TcpRing, APeerThatGoesAwayIsNamedByItsNeighbour) {
  Ring ring = connect_ring(3);
  const std::size_t n = 4 << 20;  // 16 MB per rank: far more than the socket buffers hold
  auto data = random_data(3, n, true, 3);
  std::vector<std::future<std::string>> done;
  for (int r = 0; r < 2; ++r) {  // rank 2 never joins and then exits
    auto promise = std::make_shared<std::promise<std::string>>();
    done.push_back(promise->get_future());
    ring.ranks[static_cast<std::size_t>(r)]->start(
        data[static_cast<std::size_t>(r)].data(), static_cast<std::int64_t>(n), WireDType::kF32,
        [promise](const std::string& error) { promise->set_value(error); });
  }
  ring.ranks[2].reset();
  // Rank 0 reads rank 2's stream: it sees the connection close.
  std::string error = done[0].get();
  EXPECT_NE(error.find("rank 0: gradient all-reduce: the TCP ring connection with rank 2 (left "
                       "neighbour) closed the connection"),
            std::string::npos)
      << error;
  // Rank 1 writes to rank 2 (a reset) or waits for rank 0, whose ring is now broken; either
  // way it must not succeed.
  ring.ranks[0].reset();
  EXPECT_NE(done[1].get(), "");
  // A broken ring fails later all-reduces at once, with the first error.
  auto promise = std::make_shared<std::promise<std::string>>();
  auto later = promise->get_future();
  float x = 1;
  ring.ranks[1]->start(&x, 1, WireDType::kF32,
                       [promise](const std::string& e) { promise->set_value(e); });
  EXPECT_NE(later.get(), "");
}

TEST(TcpRing, AnUnreachableNeighbourIsNamedWithTheAddressesTried) {
  TcpRing rank0(0, 2);
  std::vector<std::uint8_t> all = rank0.address();
  auto gone = std::make_unique<TcpRing>(1, 2);
  std::vector<std::uint8_t> theirs = gone->address();
  gone.reset();  // its port is closed now
  all.insert(all.end(), theirs.begin(), theirs.end());
  try {
    rank0.connect(all, 1, 2);
    FAIL() << "connected to a closed port";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("rank 0: gradient ring: cannot reach rank 1 (right neighbour): "),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("127.0.0.1:"), std::string::npos) << message;
    EXPECT_NE(message.find("refused"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace bertfit
