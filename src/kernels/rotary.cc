// Rotary position embeddings (see rotary.h).
#include "kernels/rotary.h"

#include <cmath>

#include "base/check.h"
#include "base/dtype.h"
#include "base/parallel.h"
#include "kernels/grain.h"

namespace bertfit {
namespace {

// Rotates the D/2 channel pairs of one head's row by the angles of (c, s); sign -1: the inverse.
template <class E>
void rotate(E* x, const float* c, const float* s, int half, float sign) {
  for (int k = 0; k < half; ++k) {
    float a, b;
    if constexpr (sizeof(E) == 2) {
      a = bf16_to_f32(x[k]);
      b = bf16_to_f32(x[k + half]);
    } else {
      a = x[k];
      b = x[k + half];
    }
    const float sk = sign * s[k];
    const float ra = a * c[k] - b * sk;
    const float rb = b * c[k] + a * sk;
    if constexpr (sizeof(E) == 2) {
      x[k] = f32_to_bf16(ra);
      x[k + half] = f32_to_bf16(rb);
    } else {
      x[k] = ra;
      x[k + half] = rb;
    }
  }
}

template <class E>
void apply(E* qkv, const RotaryTable& t, std::int64_t R, int C, int H, float sign) {
  CHECK(R >= 0 && H > 0 && C % H == 0 && C / H == t.D && t.D % 2 == 0 && t.T > 0, "R ", R, " C ", C,
        " H ", H, " table D ", t.D);
  const int half = t.D / 2;
  const std::int64_t grain = std::max<std::int64_t>(1, detail::kMinWorkPerThread / (4 * C));
  parallel_for(R, grain, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t pos = r % t.T;
      const float* c = t.cos.data() + pos * half;
      const float* s = t.sin.data() + pos * half;
      E* row = qkv + r * 3 * C;
      for (int h = 0; h < 2 * H; ++h)
        rotate(row + static_cast<std::int64_t>(h) * t.D, c, s, half, sign);
    }
  });
}

}  // namespace

RotaryTable rotary_table(double theta, int D, int T) {
  CHECK(D > 0 && D % 2 == 0 && T > 0 && theta > 0, "rotary D ", D, " T ", T, " theta ", theta);
  RotaryTable t;
  t.T = T;
  t.D = D;
  t.theta = theta;
  const int half = D / 2;
  // torch: inv_freq = 1.0 / (base ** (arange(0, D, 2).float() / D)), all fp32.
  std::vector<float> inv(half);
  for (int k = 0; k < half; ++k) {
    const float e = static_cast<float>(2 * k) / static_cast<float>(D);
    inv[k] = 1.0f / static_cast<float>(std::pow(static_cast<double>(static_cast<float>(theta)),
                                                static_cast<double>(e)));
  }
  t.cos.resize(static_cast<std::size_t>(T) * half);
  t.sin.resize(t.cos.size());
  for (int p = 0; p < T; ++p) {
    for (int k = 0; k < half; ++k) {
      const float angle = static_cast<float>(p) * inv[k];
      t.cos[static_cast<std::size_t>(p) * half + k] =
          static_cast<float>(std::cos(static_cast<double>(angle)));
      t.sin[static_cast<std::size_t>(p) * half + k] =
          static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
  return t;
}

void rotary_forward(float* qkv, const RotaryTable& t, std::int64_t R, int C, int H) {
  apply(qkv, t, R, C, H, 1.0f);
}

void rotary_forward(std::uint16_t* qkv, const RotaryTable& t, std::int64_t R, int C, int H) {
  apply(qkv, t, R, C, H, 1.0f);
}

void rotary_backward(float* dqkv, const RotaryTable& t, std::int64_t R, int C, int H) {
  apply(dqkv, t, R, C, H, -1.0f);
}

}  // namespace bertfit
