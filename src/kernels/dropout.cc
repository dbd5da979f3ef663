// Counter-based dropout. Element i of stream `key` draws 32 bits from the SplitMix64 output
// function applied to key + (i+1)·φ (φ = 2^64 / golden ratio), i.e. the i-th output of a
// SplitMix64 generator seeded with `key`. SplitMix64 passes BigCrush; each call is a pure
// function of (key, i), so the mask does not depend on threads, chunking or call order.
#include "kernels/dropout.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "base/parallel.h"
#include "kernels/dropout_internal.h"
#include "kernels/grain.h"

namespace bertfit {

namespace detail {

std::uint32_t keep_threshold(float p) {
  CHECK(p >= 0.0f && p < 1.0f, "dropout probability must be in [0, 1), got ", p);
  // Smallest integer t with t >= p · 2^32 (exact: a float times 2^32 is a double exactly),
  // so bits >= t  <=>  bits >= p · 2^32. For p < 1, t <= 2^32 - 2^8 fits in 32 bits.
  return static_cast<std::uint32_t>(std::ceil(static_cast<double>(p) * 4294967296.0));
}

float keep_scale(float p) {
  // torch: noise.bernoulli_(1 - p).div_(1 - p): the kept value 1 / (1 - p) computed in float.
  return 1.0f / static_cast<float>(1.0 - static_cast<double>(p));
}

}  // namespace detail

std::uint64_t dropout_key(std::uint64_t seed, std::uint64_t step, std::uint64_t micro,
                          std::uint32_t layer, std::uint32_t site) {
  // combine(h, v) = mix(mix(h ^ A) ^ (v + φ)) is a bijection of v for fixed h and of h for
  // fixed v, so changing any one field always changes the key. h and v go through different
  // maps, so swapping two fields' values does not give the same key (a symmetric combine such
  // as mix(h) ^ mix(v) would make (seed, step) = (1, 2) and (2, 1) collide).
  auto combine = [](std::uint64_t h, std::uint64_t v) {
    return detail::mix64(detail::mix64(h ^ 0xD6E8FEB86659FD93ull) ^ (v + detail::kGolden));
  };
  std::uint64_t h = detail::mix64(seed + detail::kGolden);
  h = combine(h, step);
  h = combine(h, micro);
  h = combine(h, layer);
  h = combine(h, site);
  return h;
}

std::uint32_t dropout_bits(std::uint64_t key, std::uint64_t i) {
  return detail::random_bits(key, i);
}

bool dropout_keep(std::uint64_t key, std::uint64_t i, float p) {
  return detail::random_bits(key, i) >= detail::keep_threshold(p);
}

void dropout_forward(float* out, const float* x, std::int64_t n, float p, std::uint64_t key) {
  CHECK(n >= 0, "n = ", n);
  const std::uint32_t threshold = detail::keep_threshold(p);
  if (p == 0.0f) {
    if (out != x) std::copy(x, x + n, out);
    return;
  }
  const float scale = detail::keep_scale(p);
  parallel_for(n, detail::kMinWorkPerThread, [=](std::int64_t b, std::int64_t e) {
    detail::drop_span(out + b, x + b, e - b, static_cast<std::uint64_t>(b), threshold, scale, key);
  });
}

void dropout_backward(float* dx, const float* dout, std::int64_t n, float p, std::uint64_t key) {
  dropout_forward(dx, dout, n, p, key);
}

}  // namespace bertfit
