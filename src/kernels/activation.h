// Pointwise activations on n elements: GELU (erf), gelu_new (tanh approximation), ReLU, tanh.
#pragma once

#include <cstdint>

namespace bertfit {

enum class ActKind { kGelu, kGeluNew, kRelu, kTanh };

// out = act(x); out may alias x only for kRelu and kTanh (their backward reads out).
void activation_forward(ActKind kind, float* out, const float* x, std::int64_t n);

// out = bf16(act(x)) (round to nearest even, as cast_f32_to_bf16): the activation feeding a
// bf16 product, fused with its cast so the fp32 result never reaches memory.
void activation_forward_bf16(ActKind kind, std::uint16_t* out, const float* x, std::int64_t n);

// The same from a bf16 input (a bf16 product's output): x is widened exactly to fp32, then as
// activation_forward_bf16.
void activation_forward_bf16(ActKind kind, std::uint16_t* out, const std::uint16_t* x,
                             std::int64_t n);

// dx += dout * act'(·). GELU kinds read the input x; kRelu and kTanh read the output y.
// Pass both; the kernel uses the one it needs.
void activation_backward(ActKind kind, float* dx, const float* dout, const float* x, const float* y,
                         std::int64_t n);

// dx = dout * act'(x) for a bf16 input x (widened exactly to fp32; the same arithmetic as
// activation_backward into a zeroed dx). Overwrites dx, which may alias dout. GELU kinds and
// kRelu (whose output is > 0 exactly where x is).
void activation_backward_bf16_input(ActKind kind, float* dx, const float* dout,
                                    const std::uint16_t* x, std::int64_t n);

}  // namespace bertfit
