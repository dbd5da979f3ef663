// Dropout: values against the reference, the mask's independence from threads and chunking,
// its statistics (binomial keep fraction, independence across keys and neighbours) and the
// key derivation.
#include "kernels/dropout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "base/parallel.h"
#include "kernels/ref/ref.h"
#include "kernels/test_util.h"

namespace bertfit {
namespace {

using testing::all_close;
using testing::FloatView;
using testing::kU;
using testing::Rng;

constexpr std::uint64_t kKey = 0x1234abcd5678ef01ull;

TEST(Dropout, MatchesReference) {
  for (float p : {0.0f, 0.1f, 0.5f}) {
    for (std::int64_t n : {1, 7, 63, 64, 65, 767, 768, 769, 33 * 768}) {
      SCOPED_TRACE(::testing::Message() << "p=" << p << " n=" << n);
      Rng rng(n);
      FloatView x(n), y(n), dout(n), dx(n);
      x.fill_uniform(rng, -1, 1);
      dout.fill_uniform(rng, -1, 1);
      dx.fill(std::numeric_limits<float>::quiet_NaN());  // written: none may survive
      dropout_forward(y.data(), x.data(), n, p, kKey);
      std::vector<double> ry(n), rdx(n);
      ref::dropout_forward(ry.data(), x.to_double().data(), n, p, kKey);
      // Kept: x · (1 / float(1-p)): float(1-p) and the division round once each, the product
      // once: <= 3u relative. Dropped: exactly 0.
      EXPECT_TRUE(all_close(y.data(), ry.data(), n,
                            [&](std::int64_t i) { return 4 * kU * std::fabs(ry[i]); }));
      ref::dropout_backward(rdx.data(), dout.to_double().data(), n, p, kKey);
      dropout_backward(dx.data(), dout.data(), n, p, kKey);
      // dout·scale as above; dropped: exactly 0.
      EXPECT_TRUE(all_close(dx.data(), rdx.data(), n,
                            [&](std::int64_t i) { return 4 * kU * std::fabs(rdx[i]); }));
    }
  }
}

TEST(Dropout, KeepIsTheDocumentedThreshold) {
  for (float p : {0.1f, 0.3f, 0.5f, 0.999f}) {
    for (std::uint64_t i = 0; i < 10000; ++i) {
      const bool expect = dropout_bits(kKey, i) >= static_cast<double>(p) * 4294967296.0;
      ASSERT_EQ(expect, dropout_keep(kKey, i, p)) << "p=" << p << " i=" << i;
    }
  }
}

TEST(Dropout, MaskIsIndependentOfThreadsAndInPlace) {
  const std::int64_t n = 1000003;  // not a multiple of any thread count used
  const float p = 0.3f;
  FloatView x(n);
  x.fill(1.0f);
  const int saved = num_threads();
  std::vector<float> first;
  for (int threads : {1, 2, 3, 5}) {
    set_num_threads(threads);
    FloatView y(n);
    dropout_forward(y.data(), x.data(), n, p, kKey);
    std::vector<float> got(y.data(), y.data() + n);
    if (first.empty()) {
      first = got;
    } else {
      EXPECT_EQ(first, got) << threads << " threads";
    }
  }
  set_num_threads(saved);
  // The same mask element by element from dropout_keep, whatever chunk asked for it.
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(dropout_keep(kKey, static_cast<std::uint64_t>(i), p), first[i] != 0.0f) << i;
  }
  // In place gives the same values.
  FloatView z(n);
  z.fill(1.0f);
  dropout_forward(z.data(), z.data(), n, p, kKey);
  EXPECT_EQ(0, std::memcmp(z.data(), first.data(), sizeof(float) * n));
}

TEST(Dropout, KeepFractionIsBinomial) {
  const std::int64_t n = 1000000;
  for (float p : {0.1f, 0.5f, 0.9f}) {
    std::int64_t kept = 0;
    for (std::int64_t i = 0; i < n; ++i) kept += dropout_keep(kKey, i, p) ? 1 : 0;
    // Binomial(n, 1-p): σ = sqrt(n p (1-p)); a correct generator is outside 5σ with
    // probability 6e-7.
    const double sigma = std::sqrt(n * static_cast<double>(p) * (1 - p));
    EXPECT_NEAR(static_cast<double>(kept), n * (1.0 - p), 5 * sigma) << "p=" << p;
  }
}

// Fraction of positions where two masks (p = 0.5) agree: 1/2 for independent masks.
void expect_independent(std::uint64_t key_a, std::uint64_t key_b, std::uint64_t offset_b,
                        const char* what) {
  const std::int64_t n = 200000;
  std::int64_t agree = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    agree += dropout_keep(key_a, i, 0.5f) == dropout_keep(key_b, i + offset_b, 0.5f) ? 1 : 0;
  }
  EXPECT_NEAR(static_cast<double>(agree), n / 2.0, 5 * std::sqrt(n / 4.0)) << what;
}

TEST(Dropout, DistinctKeysAndNeighboursAreIndependent) {
  const std::uint64_t k = dropout_key(42, 10, 0, 3, 1);
  expect_independent(k, dropout_key(43, 10, 0, 3, 1), 0, "seed");
  expect_independent(k, dropout_key(42, 11, 0, 3, 1), 0, "step");
  expect_independent(k, dropout_key(42, 10, 1, 3, 1), 0, "micro");
  expect_independent(k, dropout_key(42, 10, 0, 4, 1), 0, "layer");
  expect_independent(k, dropout_key(42, 10, 0, 3, 2), 0, "site");
  expect_independent(k, k, 1, "element i vs i+1");
  expect_independent(k, k + 1, 0, "key vs key+1");
}

TEST(Dropout, KeysDoNotCollide) {
  std::set<std::uint64_t> keys;
  int count = 0;
  for (std::uint64_t seed : {0ull, 1ull, 42ull}) {
    for (std::uint64_t step = 0; step < 6; ++step) {
      for (std::uint64_t micro = 0; micro < 4; ++micro) {
        for (std::uint32_t layer = 0; layer < 13; ++layer) {
          for (std::uint32_t site = 0; site < 4; ++site) {
            keys.insert(dropout_key(seed, step, micro, layer, site));
            ++count;
          }
        }
      }
    }
  }
  EXPECT_EQ(keys.size(), static_cast<std::size_t>(count));
  // Swapping two fields' values changes the key.
  EXPECT_NE(dropout_key(1, 2, 3, 4, 5), dropout_key(2, 1, 3, 4, 5));
  EXPECT_NE(dropout_key(1, 2, 3, 4, 5), dropout_key(1, 2, 3, 5, 4));
}

TEST(Dropout, ZeroProbabilityCopies) {
  const std::int64_t n = 65;
  Rng rng(5);
  FloatView x(n), y(n), dx(n);
  x.fill_uniform(rng, -1, 1);
  dropout_forward(y.data(), x.data(), n, 0.0f, kKey);
  EXPECT_EQ(0, std::memcmp(x.data(), y.data(), sizeof(float) * n));
  dx.fill(1.0f);
  dropout_backward(dx.data(), x.data(), n, 0.0f, kKey);
  EXPECT_EQ(0, std::memcmp(x.data(), dx.data(), sizeof(float) * n));
}

}  // namespace
}  // namespace bertfit
