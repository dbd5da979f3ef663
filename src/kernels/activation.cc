// Pointwise activations with PyTorch's float operation order: GELU (erf form, as
// torch.nn.functional.gelu), gelu_new (Hugging Face NewGELUActivation), ReLU and tanh. erf,
// exp and tanh come from vmath.h so that the loops vectorise.
#include "kernels/activation.h"

#include <algorithm>
#include <bit>
#include <vector>

#include "base/check.h"
#include "base/parallel.h"
#include "kernels/cast.h"
#include "kernels/dropout_internal.h"
#include "kernels/grain.h"
#include "kernels/vmath.h"

namespace bertfit {
namespace {

constexpr float kSqrt1_2 = 0.70710678118654752440f;       // 1/√2 (torch: M_SQRT1_2)
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;    // 1/√(2π), the normal density at 0
constexpr float kGeluNewScale = 0.79788456080286535588f;  // √(2/π)
constexpr float kGeluNewCubic = 0.044715f;

// gelu(x) = x · Φ(x) = x · 0.5 · (1 + erf(x/√2)); torch: x * 0.5 * (1 + erf(x * M_SQRT1_2)).
void gelu_fwd(float* out, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float xi = x[i];
    out[i] = xi * 0.5f * (1.0f + detail::verf(xi * kSqrt1_2));
  }
}

// gelu'(x) = Φ(x) + x · φ(x), φ(x) = exp(-x²/2) / √(2π).
void gelu_bwd(float* dx, const float* dout, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float xi = x[i];
    const float cdf = 0.5f * (1.0f + detail::verf(xi * kSqrt1_2));
    const float pdf = detail::vexp(-0.5f * xi * xi) * kInvSqrt2Pi;
    dx[i] += dout[i] * (cdf + xi * pdf);
  }
}

// gelu_new(x) = 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 x³))), HF's operation order.
void gelu_new_fwd(float* out, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float xi = x[i];
    const float inner = kGeluNewScale * (xi + kGeluNewCubic * (xi * xi * xi));
    out[i] = 0.5f * xi * (1.0f + detail::vtanh(inner));
  }
}

// d/dx: 0.5 (1 + t) + 0.5 x (1 - t²) · √(2/π) (1 + 3 · 0.044715 x²), t = tanh(inner).
void gelu_new_bwd(float* dx, const float* dout, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float xi = x[i];
    const float x2 = xi * xi;
    const float inner = kGeluNewScale * (xi + kGeluNewCubic * (x2 * xi));
    const float t = detail::vtanh(inner);
    const float dinner = kGeluNewScale * (1.0f + 3.0f * kGeluNewCubic * x2);
    const float d = 0.5f * (1.0f + t) + 0.5f * xi * (1.0f - t * t) * dinner;
    dx[i] += dout[i] * d;
  }
}

// relu(x) = max(x, 0); NaN propagates as in torch.
void relu_fwd(float* out, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = x[i] < 0.0f ? 0.0f : x[i];
}

// torch threshold_backward(grad, result, 0): the gradient passes where the output is > 0.
void relu_bwd(float* dx, const float* dout, const float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dx[i] += y[i] > 0.0f ? dout[i] : 0.0f;
}

void tanh_fwd(float* out, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = detail::vtanh(x[i]);
}

// torch tanh_backward: grad · (1 - y²).
void tanh_bwd(float* dx, const float* dout, const float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dx[i] += dout[i] * (1.0f - y[i] * y[i]);
}

// bf16 (upper 16 bits of a float) to fp32, exactly.
void widen_bf16(float* out, const std::uint16_t* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(x[i]) << 16);
  }
}

// A thread's scratch of at least n floats, kept from call to call.
std::vector<float>& thread_buffer(std::int64_t n) {
  thread_local std::vector<float> b;
  if (static_cast<std::int64_t>(b.size()) < n) b.resize(static_cast<std::size_t>(n));
  return b;
}

// out = act(x) as forward_span, and d = act'(x) as the backward kernels' (dout = 1), sharing
// erf / tanh.
void forward_derivative_span(ActKind kind, float* out, float* d, const float* x, std::int64_t n) {
  switch (kind) {
    case ActKind::kGelu:
      for (std::int64_t i = 0; i < n; ++i) {
        const float xi = x[i];
        const float e = detail::verf(xi * kSqrt1_2);
        out[i] = xi * 0.5f * (1.0f + e);
        const float cdf = 0.5f * (1.0f + e);
        const float pdf = detail::vexp(-0.5f * xi * xi) * kInvSqrt2Pi;
        d[i] = cdf + xi * pdf;
      }
      break;
    case ActKind::kGeluNew:
      for (std::int64_t i = 0; i < n; ++i) {
        const float xi = x[i];
        const float x2 = xi * xi;
        const float inner = kGeluNewScale * (xi + kGeluNewCubic * (x2 * xi));
        const float t = detail::vtanh(inner);
        out[i] = 0.5f * xi * (1.0f + t);
        const float dinner = kGeluNewScale * (1.0f + 3.0f * kGeluNewCubic * x2);
        d[i] = 0.5f * (1.0f + t) + 0.5f * xi * (1.0f - t * t) * dinner;
      }
      break;
    case ActKind::kRelu:
      for (std::int64_t i = 0; i < n; ++i) {
        const float y = x[i] < 0.0f ? 0.0f : x[i];
        out[i] = y;
        d[i] = y > 0.0f ? 1.0f : 0.0f;
      }
      break;
    case ActKind::kTanh:
      for (std::int64_t i = 0; i < n; ++i) {
        const float y = detail::vtanh(x[i]);
        out[i] = y;
        d[i] = 1.0f - y * y;
      }
      break;
  }
}

void forward_span(ActKind kind, float* out, const float* x, std::int64_t n) {
  switch (kind) {
    case ActKind::kGelu:
      gelu_fwd(out, x, n);
      break;
    case ActKind::kGeluNew:
      gelu_new_fwd(out, x, n);
      break;
    case ActKind::kRelu:
      relu_fwd(out, x, n);
      break;
    case ActKind::kTanh:
      tanh_fwd(out, x, n);
      break;
  }
}

}  // namespace

void activation_forward(ActKind kind, float* out, const float* x, std::int64_t n) {
  CHECK(n >= 0, "n = ", n);
  parallel_for(n, detail::kMinWorkPerThread,
               [=](std::int64_t b, std::int64_t e) { forward_span(kind, out + b, x + b, e - b); });
}

void activation_forward_bf16(ActKind kind, std::uint16_t* out, const float* x, std::int64_t n) {
  CHECK(n >= 0, "n = ", n);
  parallel_for(n, detail::kMinWorkPerThread, [=](std::int64_t b, std::int64_t e) {
    // Through an L1-sized fp32 chunk: the same arithmetic as activation_forward, then the cast.
    constexpr std::int64_t kChunk = 2048;
    alignas(64) float chunk[kChunk];
    for (std::int64_t i = b; i < e; i += kChunk) {
      const std::int64_t m = std::min(kChunk, e - i);
      forward_span(kind, chunk, x + i, m);
      cast_f32_to_bf16(out + i, chunk, m);
    }
  });
}

namespace {

constexpr std::int64_t kWideChunk = 2048;  // floats: L1-sized

// Runs f(i, in, m) over L1-sized chunks [i, i+m) of [0, n) in parallel, `in` holding x's
// chunk widened exactly to fp32.
template <class F>
void over_widened_chunks(const std::uint16_t* x, std::int64_t n, F f) {
  parallel_for(n, detail::kMinWorkPerThread, [=](std::int64_t b, std::int64_t e) {
    alignas(64) float in[kWideChunk];
    for (std::int64_t i = b; i < e; i += kWideChunk) {
      const std::int64_t m = std::min(kWideChunk, e - i);
      widen_bf16(in, x + i, m);
      f(i, in, m);
    }
  });
}

}  // namespace

void activation_forward_bf16(ActKind kind, std::uint16_t* out, const std::uint16_t* x,
                             std::int64_t n) {
  CHECK(n >= 0, "n = ", n);
  over_widened_chunks(x, n, [=](std::int64_t i, const float* in, std::int64_t m) {
    alignas(64) float y[kWideChunk];
    forward_span(kind, y, in, m);
    cast_f32_to_bf16(out + i, y, m);
  });
}

void activation_backward(ActKind kind, float* dx, const float* dout, const float* x, const float* y,
                         std::int64_t n) {
  CHECK(n >= 0, "n = ", n);
  const bool reads_x = kind == ActKind::kGelu || kind == ActKind::kGeluNew;
  CHECK(reads_x ? x != nullptr : y != nullptr, "activation_backward needs ",
        reads_x ? "the input x" : "the output y");
  parallel_for(n, detail::kMinWorkPerThread, [=](std::int64_t b, std::int64_t e) {
    switch (kind) {
      case ActKind::kGelu:
        gelu_bwd(dx + b, dout + b, x + b, e - b);
        break;
      case ActKind::kGeluNew:
        gelu_new_bwd(dx + b, dout + b, x + b, e - b);
        break;
      case ActKind::kRelu:
        relu_bwd(dx + b, dout + b, y + b, e - b);
        break;
      case ActKind::kTanh:
        tanh_bwd(dx + b, dout + b, y + b, e - b);
        break;
    }
  });
}

void activation_forward_bf16_keep_derivative(ActKind kind, std::uint16_t* out, std::uint16_t* x,
                                             std::int64_t n) {
  CHECK(n >= 0, "n = ", n);
  CHECK(out != x, "the activation's output cannot overwrite its input's derivative");
  over_widened_chunks(x, n, [=](std::int64_t i, const float* in, std::int64_t m) {
    alignas(64) float y[kWideChunk];
    alignas(64) float d[kWideChunk];
    forward_derivative_span(kind, y, d, in, m);
    cast_f32_to_bf16(out + i, y, m);  // on this thread: inside over_widened_chunks' region
    cast_f32_to_bf16(x + i, d, m);
  });
}

void derivative_bias_backward_bf16(float* dbias, std::uint16_t* g_bf16, const std::uint16_t* dout,
                                   const std::uint16_t* d, std::int64_t N, int M) {
  CHECK(N >= 0 && M > 0, "N = ", N, ", M = ", M);
  // Each thread owns a block of columns over all rows (as bias_backward: the same sums in the
  // same order).
  detail::parallel_columns(N, M, [&](int c0, int c1) {
    std::vector<double> acc(static_cast<std::size_t>(c1 - c0), 0.0);
    double* a = acc.data();
    const int w = c1 - c0;
    for (std::int64_t r = 0; r < N; ++r) {
      const std::int64_t at = r * M + c0;
      const std::uint16_t* dz = dout + at;
      const std::uint16_t* dr = d + at;
      std::uint16_t* o = g_bf16 + at;
#pragma omp simd
      for (int k = 0; k < w; ++k) {
        const float g = bf16_to_f32(dz[k]) * bf16_to_f32(dr[k]);
        a[k] += g;
        o[k] = f32_to_bf16(g);
      }
    }
    for (int c = c0; c < c1; ++c) dbias[c] += static_cast<float>(acc[c - c0]);
  });
}

namespace {

// Drop's factor for element i of a stream: 1/(1-p) kept, 0 dropped; 1 without dropout.
struct GateDropout {
  float p;
  std::uint64_t key;
  std::uint32_t threshold;
  float scale;
  GateDropout(float p_, std::uint64_t key_)
      : p(p_), key(key_), threshold(detail::keep_threshold(p_)), scale(detail::keep_scale(p_)) {}
  float factor(std::uint64_t i) const {
    if (p == 0.0f) return 1.0f;
    return detail::random_bits(key, i) >= threshold ? scale : 0.0f;
  }
};

// One row of a gated activation in fp32: y = Drop(act(in) · gate), `first` the index of the
// row's first output element in the dropout stream.
void gated_row(ActKind kind, float* y, const float* in, const float* gate, std::int64_t I,
               const GateDropout& drop, std::uint64_t first) {
  alignas(64) float a[kWideChunk];
  for (std::int64_t i = 0; i < I; i += kWideChunk) {
    const std::int64_t m = std::min(kWideChunk, I - i);
    forward_span(kind, a, in + i, m);
    for (std::int64_t k = 0; k < m; ++k) y[i + k] = a[k] * gate[i + k];
    if (drop.p != 0.0f) {
      for (std::int64_t k = 0; k < m; ++k) {
        y[i + k] *= drop.factor(first + static_cast<std::uint64_t>(i + k));
      }
    }
  }
}

void gated_row_backward(ActKind kind, float* d_in, float* d_gate, const float* dy, const float* in,
                        const float* gate, std::int64_t I, const GateDropout& drop,
                        std::uint64_t first) {
  alignas(64) float a[kWideChunk];
  alignas(64) float d[kWideChunk];
  for (std::int64_t i = 0; i < I; i += kWideChunk) {
    const std::int64_t m = std::min(kWideChunk, I - i);
    forward_derivative_span(kind, a, d, in + i, m);
    for (std::int64_t k = 0; k < m; ++k) {
      const float g = drop.p != 0.0f
                          ? dy[i + k] * drop.factor(first + static_cast<std::uint64_t>(i + k))
                          : dy[i + k];
      d_in[i + k] = g * gate[i + k] * d[k];
      d_gate[i + k] = g * a[k];
    }
  }
}

// f(r) for every row r of M in parallel, a row's work ~ I.
template <class F>
void over_rows(std::int64_t M, std::int64_t I, F f) {
  const std::int64_t grain =
      std::max<std::int64_t>(1, detail::kMinWorkPerThread / std::max<std::int64_t>(I, 1));
  parallel_for(M, grain, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) f(r);
  });
}

}  // namespace

void gated_activation_forward(ActKind kind, float* out, const float* x, std::int64_t M,
                              std::int64_t I, float p, std::uint64_t key) {
  CHECK(M >= 0 && I > 0, "M = ", M, ", I = ", I);
  const GateDropout drop(p, key);
  over_rows(M, I, [&](std::int64_t r) {
    const float* xr = x + r * 2 * I;
    gated_row(kind, out + r * I, xr, xr + I, I, drop, static_cast<std::uint64_t>(r * I));
  });
}

void gated_activation_forward_bf16(ActKind kind, std::uint16_t* out, const std::uint16_t* x,
                                   std::int64_t M, std::int64_t I, float p, std::uint64_t key) {
  CHECK(M >= 0 && I > 0, "M = ", M, ", I = ", I);
  const GateDropout drop(p, key);
  over_rows(M, I, [&](std::int64_t r) {
    float* in = thread_buffer(3 * I).data();  // input | gate | y
    widen_bf16(in, x + r * 2 * I, 2 * I);
    float* y = in + 2 * I;
    gated_row(kind, y, in, in + I, I, drop, static_cast<std::uint64_t>(r * I));
    cast_f32_to_bf16(out + r * I, y, I);
  });
}

void gated_activation_backward(ActKind kind, float* dx, const float* dout, const float* x,
                               std::int64_t M, std::int64_t I, float p, std::uint64_t key) {
  CHECK(M >= 0 && I > 0, "M = ", M, ", I = ", I);
  const GateDropout drop(p, key);
  over_rows(M, I, [&](std::int64_t r) {
    const float* xr = x + r * 2 * I;
    float* dr = dx + r * 2 * I;
    gated_row_backward(kind, dr, dr + I, dout + r * I, xr, xr + I, I, drop,
                       static_cast<std::uint64_t>(r * I));
  });
}

void gated_activation_backward_bf16(ActKind kind, std::uint16_t* dx, const std::uint16_t* dout,
                                    const std::uint16_t* x, std::int64_t M, std::int64_t I, float p,
                                    std::uint64_t key) {
  CHECK(M >= 0 && I > 0, "M = ", M, ", I = ", I);
  const GateDropout drop(p, key);
  over_rows(M, I, [&](std::int64_t r) {
    float* in = thread_buffer(5 * I).data();  // input | gate (2I), dy (I), d (2I)
    float* dy = in + 2 * I;
    float* d = dy + I;
    widen_bf16(in, x + r * 2 * I, 2 * I);
    widen_bf16(dy, dout + r * I, I);
    gated_row_backward(kind, d, d + I, dy, in, in + I, I, drop, static_cast<std::uint64_t>(r * I));
    cast_f32_to_bf16(dx + r * 2 * I, d, 2 * I);
  });
}

}  // namespace bertfit
