// Pointwise activations on n elements: GELU (erf), gelu_new (tanh approximation), ReLU, tanh.
#pragma once

#include <cstdint>

namespace bertfit {

enum class ActKind { kGelu, kGeluNew, kRelu, kTanh };

// out = act(x); out may alias x only for kRelu and kTanh (their backward reads out).
void activation_forward(ActKind kind, float* out, const float* x, std::int64_t n);

// dx += dout * act'(·). GELU kinds read the input x; kRelu and kTanh read the output y.
// Pass both; the kernel uses the one it needs.
void activation_backward(ActKind kind, float* dx, const float* dout, const float* x, const float* y,
                         std::int64_t n);

}  // namespace bertfit
