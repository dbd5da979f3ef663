// Helpers shared by the kernel tests: deterministic random data, unaligned float views, float
// <-> double copies and an element-wise closeness check that reports the worst element.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "base/aligned.h"

namespace bertfit::testing {

// Unit roundoff of float (round to nearest): a float operation on exact inputs is off by at
// most kU times the magnitude of its result.
inline constexpr double kU = 1.0 / (1 << 24);

// A reproducible generator (same numbers on every platform): 64-bit LCG, top 24 bits.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  double uniform(double lo, double hi) {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * static_cast<double>(state_ >> 40) / (1 << 24);
  }
  int below(int n) { return static_cast<int>(uniform(0, n)) % n; }

 private:
  std::uint64_t state_;
};

// n floats starting one float past a 64-byte boundary, so no kernel can rely on alignment.
class FloatView {
 public:
  explicit FloatView(std::int64_t n) : buf_(static_cast<std::size_t>(n) + 17), n_(n) {}
  float* data() { return buf_.data() + 1; }
  const float* data() const { return buf_.data() + 1; }
  std::int64_t size() const { return n_; }
  float& operator[](std::int64_t i) { return data()[i]; }
  float operator[](std::int64_t i) const { return data()[i]; }
  void fill_uniform(Rng& rng, double lo, double hi) {
    for (std::int64_t i = 0; i < n_; ++i) data()[i] = static_cast<float>(rng.uniform(lo, hi));
  }
  void fill(float v) {
    for (std::int64_t i = 0; i < n_; ++i) data()[i] = v;
  }
  // The exact values as doubles, for the reference.
  std::vector<double> to_double() const { return std::vector<double>(data(), data() + n_); }

 private:
  AlignedBuffer<float> buf_;
  std::int64_t n_;
};

// Checks |got[i] - want[i]| <= tol(i) for every i; on failure reports the count and the worst
// element (largest ratio error / tolerance).
inline ::testing::AssertionResult all_close(const float* got, const double* want, std::int64_t n,
                                            const std::function<double(std::int64_t)>& tol) {
  std::int64_t bad = 0, worst = -1;
  double worst_ratio = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double t = tol(i);
    const double ratio = err / t;
    if (!(err <= t)) ++bad;  // NaN counts as bad
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os.precision(9);
  os << bad << " of " << n << " elements out of tolerance; worst [" << worst << "]: got "
     << got[worst] << ", want " << want[worst] << ", tol " << tol(worst);
  return ::testing::AssertionFailure() << os.str();
}

// Same check with one tolerance for all elements.
inline ::testing::AssertionResult all_close(const float* got, const double* want, std::int64_t n,
                                            double tol) {
  return all_close(got, want, n, [tol](std::int64_t) { return tol; });
}

// Largest |x| over a vector, at least `floor` (for normwise tolerances).
inline double max_abs(const std::vector<double>& x, double floor = 0.0) {
  double m = floor;
  for (double v : x) m = std::max(m, std::fabs(v));
  return m;
}

}  // namespace bertfit::testing
