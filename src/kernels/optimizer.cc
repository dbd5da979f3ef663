// AdamW with torch 1.13's float operation order (_single_tensor_adamw), and the helpers the
// trainer uses for global-norm clipping.
//
// The Python code being replicated (hyperparameters and lr are Python floats, i.e. double;
// a Python scalar meeting a float32 tensor is rounded to float first):
//   param.mul_(1 - lr * weight_decay)                       # p · float(1 - lr·wd)
//   exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)        # fma(g, float(1-b1), m · float(b1))
//   exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
//                                                          # v·float(b2) + (float(1-b2)·g)·g
//   bias_correction1 = 1 - beta1 ** step                    # double
//   bias_correction2 = 1 - beta2 ** step                    # double
//   step_size = lr / bias_correction1                       # double
//   denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(eps)
//                                                          # sqrt(v) / float(√bc2) + float(eps)
//   param.addcdiv_(exp_avg, denom, value=-step_size)        # p + (float(-step_size) · m) / denom
// add_ with alpha is a fused multiply-add in ATen's vectorised kernel (ufunc::add →
// vec::fmadd); addcmul/addcdiv evaluate left to right (self + value * t1 * t2, self + value *
// t1 / t2). Compiled without contraction (ISO C++ mode), each line below rounds exactly there.
#include "kernels/optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "base/parallel.h"
#include "kernels/grain.h"

namespace bertfit {

void adamw_update(float* param, const float* grad, float* m, float* v, std::int64_t n,
                  const AdamWParams& h, bool decay) {
  CHECK(n >= 0, "n = ", n);
  CHECK(h.step >= 1, "AdamW step is 1-based, got ", h.step);
  const float decay_factor = static_cast<float>(1.0 - h.lr * h.weight_decay);
  const float b1 = static_cast<float>(h.beta1);
  const float one_minus_b1 = static_cast<float>(1.0 - h.beta1);
  const float b2 = static_cast<float>(h.beta2);
  const float one_minus_b2 = static_cast<float>(1.0 - h.beta2);
  const double step = static_cast<double>(h.step);
  const double bias_correction1 = 1.0 - std::pow(h.beta1, step);
  const double bias_correction2 = 1.0 - std::pow(h.beta2, step);
  const float neg_step_size = static_cast<float>(-(h.lr / bias_correction1));
  const float bc2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  const float eps = static_cast<float>(h.eps);
  const float grad_scale = h.grad_scale;
  parallel_for(n, detail::kMinWorkPerThread, [=](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      const float p = decay ? param[i] * decay_factor : param[i];
      const float g = grad[i] * grad_scale;
      const float mi = std::fma(g, one_minus_b1, m[i] * b1);
      const float vi = v[i] * b2 + (one_minus_b2 * g) * g;
      const float denom = std::sqrt(vi) / bc2_sqrt + eps;
      param[i] = p + (neg_step_size * mi) / denom;
      m[i] = mi;
      v[i] = vi;
    }
  });
}

double sum_squares(const float* x, std::int64_t n) {
  CHECK(n >= 0, "n = ", n);
  // Fixed blocks summed independently, then added in block order: the result does not depend
  // on the thread count.
  constexpr std::int64_t kBlock = 1 << 16;
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(blocks, 0.0);
  parallel_for(blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t blk = b0; blk < b1; ++blk) {
      const float* p = x + blk * kBlock;
      const std::int64_t len = std::min(kBlock, n - blk * kBlock);
      double s = 0.0;
#pragma omp simd reduction(+ : s)
      for (std::int64_t i = 0; i < len; ++i) s += static_cast<double>(p[i]) * p[i];
      partial[blk] = s;
    }
  });
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace bertfit
