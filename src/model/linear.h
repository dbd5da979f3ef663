// The model's matrix products in the precision of the weight they are bound to, and the view of
// the tensors they read and write. The layer code calls the same functions in every precision;
// what differs (rounding the input, keeping an output in bf16, the fused backward of ff1) lives
// here, so a further precision adds an implementation here and no branch in the layer.
#pragma once

#include <cstdint>

#include "gemm/gemm.h"
#include "kernels/activation.h"

namespace bertfit {

// A tensor of rows as the precision in use stores it (Activations hands these out): fp32 rows;
// bf16 rows, for a tensor only bf16 products and kernels read, kept in half the bytes; or fp32
// rows with a bf16 slot of the same shape, which the product reading the rows fills with their
// rounding and keeps for its weight gradient. Unused forms are null. int8 inference: fp32 rows,
// and for a product's input made by a kernel that can quantize it as it goes, a quantized slot
// that kernel fills (Linear::prepare_input) and the product reads instead of quantizing.
struct Rows {
  float* f32 = nullptr;
  std::uint16_t* bf16 = nullptr;
  QuantizedRows q8{};
};

// Scratch of a product's backward: the output gradient rounded to bf16 (bf16 products, M·N).
struct LinearScratch {
  std::uint16_t* dy_bf16 = nullptr;
};

// A PyTorch Linear y = x·wᵀ + b bound to its weight w (N,K), its bias b (N) and, when the
// products run in bf16 or int8, that weight prepared for gemm/ (ModelWeights). The precision
// is the prepared form's: none is fp32. int8 is for inference: it reads x.f32 and writes y.f32
// (the product quantizes its input itself), and has no backward.
class Linear {
 public:
  Linear(const float* w, const float* b, const PreparedWeightBf16* prepared, std::int64_t N,
         std::int64_t K);
  Linear(const float* w, const float* b, const PreparedWeightInt8* prepared, std::int64_t N,
         std::int64_t K);
  // fp32 forward products from a prepared fp32 weight (inference; backward reads w).
  Linear(const float* w, const float* b, const PreparedWeightF32* prepared, std::int64_t N,
         std::int64_t K);

  std::int64_t in_features() const { return K_; }
  std::int64_t out_features() const { return N_; }

  // y (M,N) = x (M,K)·wᵀ + b. fp32 reads x.f32 into y.f32. bf16 rounds x.f32 (when set) into
  // x.bf16 and reads that; the output goes to y.f32, or, when y has no fp32 form, to y.bf16
  // rounded once from the fp32 sum. int8 reads x.q8 when x has that slot (which
  // prepare_input must have filled), else quantizes x.f32 itself; it writes y.f32 and, when y
  // has a bf16 form too, each row's rounding there (for a bf16 kernel that reads it).
  void forward(Rows y, Rows x, std::int64_t M) const;
  // The same, then `then(m0, m1)` on row blocks of y covering [0, M): the element-wise work
  // that follows the product. int8 runs it inside its last pass over y, each thread on its own
  // rows as soon as they are dequantized (one parallel region and one trip through memory
  // fewer); the other precisions call then(0, M) after the product. `then` must therefore give
  // the same result whichever way the rows are split (row-wise work, kernels called on a row
  // range; a kernel called inside a parallel region runs on that thread, base/parallel.h).
  void forward(Rows y, Rows x, std::int64_t M, const RowsDone& then) const;

  // Rows [m0, m1) of x put into the form this product's forward reads, where forward would make
  // it: int8 quantizes them into x.q8 (when x has that slot); the other precisions have nothing
  // to do here. Called by the kernel that makes x, on its rows, to save the product that pass.
  void prepare_input(Rows x, std::int64_t m0, std::int64_t m1) const;

  // The input gradient dx (M,K) = dy·w (kOverwrite) or += (kAccumulate), and dw (N,K) += dyᵀ·x,
  // db (N) += Σ dy, from dy (M,N) and x as forward read it.
  void backward(float* dx, Output dx_out, float* dw, float* db, const float* dy, Rows x,
                LinearScratch scratch, std::int64_t M) const;

  // The form in which backward_products reads an output gradient: fp32 rows in `f32` (fp32
  // products) or bf16 rows in the scratch (bf16). A kernel that makes dy writes this form (and
  // the bias gradient) itself, as layernorm_dropout_bias_backward does.
  Rows grad_form(float* f32, LinearScratch scratch) const;

  // backward without the bias gradient, from dy in grad_form's form. dx in fp32 (dx.f32), or,
  // for bf16 products, in bf16 alone (dx.bf16, no dx.f32: written, rounded once from the fp32
  // sum; Output::kOverwrite only).
  void backward_products(Rows dx, Output dx_out, float* dw, Rows dy, Rows x, std::int64_t M) const;

  // The same for z = act(y) with y this product's output: from dz (M,N), the product's output y
  // and the activation's output z as forward kept them, through the activation's backward.
  // fp32: dz.f32, y.f32 and z.f32. bf16: dz in bf16 alone (as the next product's
  // backward_products writes it) and, in y's bf16 slot, act'(y) as the training forward left it
  // there (activation_forward_bf16_keep_derivative). d_pre (M,N) is fp32 scratch (fp32 only).
  void backward_through_activation(ActKind act, float* dx, Output dx_out, float* dw, float* db,
                                   Rows dz, Rows y, Rows z, float* d_pre, Rows x,
                                   LinearScratch scratch, std::int64_t M) const;

 private:
  const PreparedWeightBf16& prepared() const;

  const float* w_;
  const float* b_;
  const PreparedWeightBf16* prepared_;
  const PreparedWeightInt8* int8_ = nullptr;
  const PreparedWeightF32* f32_ = nullptr;
  std::int64_t N_, K_;
};

}  // namespace bertfit
