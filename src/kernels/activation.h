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

// The backward of act(x) where x (N,M) is a bf16 product's output (bias included): g = dout ·
// act'(x) for x widened exactly to fp32 (as activation_backward into zeros; GELU kinds and kRelu,
// whose output is > 0 exactly where x is), dbias (M) += column sums of g as bias_backward, and
// g_bf16 = bf16(g) as cast_f32_to_bf16 (the operand of the product's backward), in one pass; g
// itself is never stored. Results are bit for bit those of the three separate kernels.
void activation_bias_backward_bf16(ActKind kind, float* dbias, std::uint16_t* g_bf16,
                                   const float* dout, const std::uint16_t* x, std::int64_t N,
                                   int M);

}  // namespace bertfit
