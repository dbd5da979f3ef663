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

// Training's bf16 forward: out = bf16(act(x)) as activation_forward_bf16, and x overwritten by
// d = bf16(act'(x)) (rounded once from the value activation_backward uses, for x widened exactly
// to fp32; kRelu: 1 where x > 0, else 0, as its backward passes the gradient where the output
// is > 0; kTanh: 1 - out² from the fp32 out). The derivative shares the forward's erf / tanh and
// is what the backward reads instead of recomputing them. out must not alias x.
void activation_forward_bf16_keep_derivative(ActKind kind, std::uint16_t* out, std::uint16_t* x,
                                             std::int64_t n);

// Its backward fused with the bias gradient of the product before it and the cast for that
// product's backward, over (N,M): g = dout · d (both bf16, so the fp32 product is exact),
// dbias (M) += column sums of g in double (as bias_backward), g_bf16 = bf16(g) (as
// cast_f32_to_bf16), in one pass; g itself is never stored. g_bf16 may alias dout.
void derivative_bias_backward_bf16(float* dbias, std::uint16_t* g_bf16, const std::uint16_t* dout,
                                   const std::uint16_t* d, std::int64_t N, int M);

// Gated activations (GeGLU and its kin): x (M, 2I) holds each row's input then its gate;
// out (M, I) = Drop(act(input) · gate), as transformers' `drop(act(input) * gate)` after
// `chunk(2, dim=-1)` (ModernBERT's MLP). Drop as dropout_forward with stream `key` over the
// (M, I) output (element r·I + k); p = 0: none.
void gated_activation_forward(ActKind kind, float* out, const float* x, std::int64_t M,
                              std::int64_t I, float p, std::uint64_t key);
// The same on bf16 x and out (fp32 arithmetic, the result rounded once).
void gated_activation_forward_bf16(ActKind kind, std::uint16_t* out, const std::uint16_t* x,
                                   std::int64_t M, std::int64_t I, float p, std::uint64_t key);
// dx (M, 2I) written from dout (M, I), the gradient w.r.t. out: with g = Drop's backward of
// dout, d input = g · gate · act'(input), d gate = g · act(input).
void gated_activation_backward(ActKind kind, float* dx, const float* dout, const float* x,
                               std::int64_t M, std::int64_t I, float p, std::uint64_t key);
// The same from bf16 dout and x into bf16 dx (each value rounded once from fp32).
void gated_activation_backward_bf16(ActKind kind, std::uint16_t* dx, const std::uint16_t* dout,
                                    const std::uint16_t* x, std::int64_t M, std::int64_t I, float p,
                                    std::uint64_t key);

}  // namespace bertfit
