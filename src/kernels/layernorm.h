// LayerNorm over the last dimension, biased variance, as torch.nn.LayerNorm.
#pragma once

#include <cstdint>

namespace bertfit {

// x, out: (N,C); weight, bias: (C); mean, rstd: (N) saved for backward. out may alias x.
void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight,
                       const float* bias, std::int64_t N, int C, float eps);

// dx (N,C) = the input's gradient (written, not summed: it is the only term), and dweight,
// dbias (C) += from dout (N,C). Needs the input x (not aliased by out); dx may alias neither x
// nor dout.
void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* weight, const float* mean, const float* rstd, std::int64_t N,
                        int C);

}  // namespace bertfit
