// AdamW exactly as torch.optim.AdamW (1.13, single-tensor path) and gradient-norm helpers.
#pragma once

#include <cstdint>

namespace bertfit {

// Hyperparameters are double, as the Python floats torch receives: torch rounds each scalar
// (e.g. 1 - beta1 = 0.09999999999999998) to float only where it meets a float tensor, and
// float(1 - 0.9) != 1 - 0.9f, so float fields could not reproduce its trajectory.
struct AdamWParams {
  double lr;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // applied only when the caller passes decay = true
  std::int64_t step = 1;      // 1-based step for bias correction
  // Multiplies every gradient before use: global-norm clipping's coefficient (torch's
  // grad.mul_(clip_coef) in float, folded in here to save a pass over the gradients). 1 is
  // exact, so an unclipped step is unchanged.
  float grad_scale = 1.0f;
};

// Over n elements, with g = grad · grad_scale:
// p *= 1 - lr·wd (if decay); m = b1·m + (1-b1)·g; v = b2·v + (1-b2)·g²;
// p -= (lr / (1-b1^t)) · m / (sqrt(v) / sqrt(1-b2^t) + eps). Same float operation order as
// PyTorch so that trajectories match to rounding.
void adamw_update(float* param, const float* grad, float* m, float* v, std::int64_t n,
                  const AdamWParams& h, bool decay);

// Sum of squares of x[0..n) in double.
double sum_squares(const float* x, std::int64_t n);

}  // namespace bertfit
