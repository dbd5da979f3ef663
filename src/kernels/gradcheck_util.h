// Finite-difference helpers for the gradient checks: central differences of a double loss,
// and the comparisons (numeric vs reference backward, fast vs reference backward).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/test_util.h"

namespace bertfit::testing {

// Step of the central differences. For inputs and losses of order 1, the truncation error is
// h²/6·|L'''| ~ 1e-12 and the rounding error ~ (n·2^-53·|L|)/(2h) ~ 1e-10·n for a loss summed
// over n terms: both far below the 1e-6 tolerance for the n <= ~1000 used here.
inline constexpr double kStep = 1e-6;
inline constexpr double kFdTol = 1e-6;

// dL/dx by central differences, perturbing each x[i] in place (restored afterwards).
inline std::vector<double> numeric_gradient(std::vector<double>& x,
                                            const std::function<double()>& loss) {
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + kStep;
    const double up = loss();
    x[i] = saved - kStep;
    const double down = loss();
    x[i] = saved;
    g[i] = (up - down) / (2 * kStep);
  }
  return g;
}

// Σ w·y: a scalar loss whose gradient w.r.t. y is w (the dout fed to the backward).
inline double weighted_sum(const std::vector<double>& w, const std::vector<double>& y) {
  double s = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) s += w[i] * y[i];
  return s;
}

// |analytic - numeric| <= kFdTol·(1 + |analytic|) element by element.
inline ::testing::AssertionResult gradients_match(const std::vector<double>& analytic,
                                                  const std::vector<double>& numeric) {
  for (std::size_t i = 0; i < analytic.size(); ++i) {
    const double tol = kFdTol * (1 + std::fabs(analytic[i]));
    if (!(std::fabs(analytic[i] - numeric[i]) <= tol)) {
      return ::testing::AssertionFailure()
             << "element " << i << ": analytic " << analytic[i] << ", numeric " << numeric[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// The fast float backward against the reference backward on the same inputs, normwise: every
// entry is built from float sums of at most `length` terms of order max|ref| or less, so its
// error is <= length·u·max|ref| to first order; factor 4 for the few extra roundings.
inline ::testing::AssertionResult fast_matches_reference(const float* fast,
                                                         const std::vector<double>& ref,
                                                         double length) {
  const double tol = 4 * length * kU * max_abs(ref, 1.0);
  return all_close(fast, ref.data(), static_cast<std::int64_t>(ref.size()), tol);
}

// Converts float test data to the doubles the reference sees (exactly the same values).
inline std::vector<double> as_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Random floats in [lo, hi).
inline std::vector<float> random_floats(Rng& rng, std::size_t n, double lo, double hi) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.uniform(lo, hi));
  return v;
}

}  // namespace bertfit::testing
