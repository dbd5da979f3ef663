// Linear products in fp32 or bf16 (see linear.h).
#include "model/linear.h"

#include <cstring>

#include "base/check.h"
#include "kernels/kernels.h"

namespace bertfit {

Linear::Linear(const float* w, const float* b, const PreparedWeightBf16* prepared, std::int64_t N,
               std::int64_t K)
    : w_(w), b_(b), prepared_(prepared), N_(N), K_(K) {
  CHECK(prepared == nullptr || (prepared->N() == N && prepared->K() == K), "a Linear (", N, ", ", K,
        ") bound to a prepared weight of another shape");
}

Linear::Linear(const float* w, const float* b, const PreparedWeightInt8* prepared, std::int64_t N,
               std::int64_t K)
    : w_(w), b_(b), prepared_(nullptr), int8_(prepared), N_(N), K_(K) {
  CHECK(prepared != nullptr && prepared->N() == N && prepared->K() == K, "a Linear (", N, ", ", K,
        ") bound to an int8 weight of another shape");
}

const PreparedWeightBf16& Linear::prepared() const {
  CHECK(prepared_ != nullptr, "bf16 product without its prepared weight");
  return *prepared_;
}

Linear::Linear(const float* w, const float* b, const PreparedWeightF32* prepared, std::int64_t N,
               std::int64_t K)
    : w_(w), b_(b), prepared_(nullptr), f32_(prepared), N_(N), K_(K) {
  CHECK(prepared != nullptr && prepared->N() == N && prepared->K() == K, "a Linear (", N, ", ", K,
        ") bound to a prepared fp32 weight of another shape");
}

void Linear::forward(Rows y, Rows x, std::int64_t M) const {
  if (f32_ != nullptr) {
    CHECK(x.f32 != nullptr && y.f32 != nullptr, "fp32 product without fp32 operands");
    return linear_forward(y.f32, x.f32, *f32_, b_, M);
  }
  if (int8_ != nullptr) return forward(y, x, M, RowsDone{});
  if (prepared_ == nullptr) {
    CHECK(x.f32 != nullptr && y.f32 != nullptr, "fp32 product without fp32 operands");
    return linear_forward(y.f32, x.f32, w_, b_, M, K_, N_);
  }
  CHECK(x.bf16 != nullptr, "bf16 product without a bf16 input");
  if (x.f32 != nullptr) cast_f32_to_bf16(x.bf16, x.f32, M * K_);
  if (y.f32 != nullptr) return linear_forward_bf16(y.f32, x.bf16, prepared(), b_, M);
  CHECK(y.bf16 != nullptr, "product without an output");
  linear_forward_bf16_out(y.bf16, x.bf16, prepared(), b_, M);
}

void Linear::forward(Rows y, Rows x, std::int64_t M, const RowsDone& then) const {
  if (int8_ == nullptr) {
    forward(y, x, M);
    if (then && M > 0) then(0, M);
    return;
  }
  CHECK(y.f32 != nullptr && (x.f32 != nullptr || x.q8.q != nullptr),
        "int8 product without fp32 operands");
  // y with a bf16 form too (attention's operand): each row rounded into it as it is made.
  const auto round_then = [&](std::int64_t m0, std::int64_t m1) {
    cast_f32_to_bf16(y.bf16 + m0 * N_, y.f32 + m0 * N_, (m1 - m0) * N_);
    if (then) then(m0, m1);
  };
  const RowsDone done = y.bf16 != nullptr ? RowsDone(round_then) : then;
  if (x.q8.q != nullptr) return linear_forward_int8(y.f32, x.q8, *int8_, b_, M, done);
  linear_forward_int8(y.f32, x.f32, *int8_, b_, M, done);
}

void Linear::prepare_input(Rows x, std::int64_t m0, std::int64_t m1) const {
  if (int8_ == nullptr || x.q8.q == nullptr) return;
  CHECK(x.f32 != nullptr, "an int8 input to prepare without its fp32 rows");
  quantize_rows_u8(x.q8, x.f32, K_, m0, m1);
}

void Linear::backward(float* dx, Output dx_out, float* dw, float* db, const float* dy, Rows x,
                      LinearScratch scratch, std::int64_t M) const {
  CHECK(int8_ == nullptr, "int8 products are for inference only");
  // db null: a product without bias (b_ null too).
  if (prepared_ == nullptr) {
    if (db != nullptr) bias_backward(db, dy, M, static_cast<int>(N_));
    return backward_products(Rows{dx}, dx_out, dw, Rows{const_cast<float*>(dy)}, x, M);
  }
  if (db != nullptr) {
    bias_backward_cast(db, scratch.dy_bf16, dy, M, static_cast<int>(N_));  // one pass over dy
  } else {
    cast_f32_to_bf16(scratch.dy_bf16, dy, M * N_);
  }
  backward_products(Rows{dx}, dx_out, dw, Rows{nullptr, scratch.dy_bf16}, x, M);
}

Rows Linear::grad_form(float* f32, LinearScratch scratch) const {
  CHECK(int8_ == nullptr, "int8 products are for inference only");
  if (prepared_ == nullptr) return Rows{f32};
  CHECK(scratch.dy_bf16 != nullptr, "bf16 backward without its bf16 scratch");
  return Rows{nullptr, scratch.dy_bf16};
}

void Linear::backward_products(Rows dx, Output dx_out, float* dw, Rows dy, Rows x,
                               std::int64_t M) const {
  CHECK(int8_ == nullptr, "int8 products are for inference only");
  if (prepared_ == nullptr) {
    CHECK(dy.f32 != nullptr && x.f32 != nullptr && dx.f32 != nullptr,
          "fp32 backward without fp32 operands");
    linear_backward_weight(dw, dy.f32, x.f32, M, K_, N_);
    linear_backward_input(dx.f32, dy.f32, w_, M, K_, N_, dx_out);
    return;
  }
  CHECK(dy.bf16 != nullptr && x.bf16 != nullptr, "bf16 backward without bf16 operands");
  linear_backward_weight_bf16(dw, dy.bf16, x.bf16, M, K_, N_);
  if (dx.f32 != nullptr) return linear_backward_input_bf16(dx.f32, dy.bf16, prepared(), M, dx_out);
  CHECK(dx.bf16 != nullptr && dx_out == Output::kOverwrite,
        "a bf16 input gradient is written, never accumulated");
  linear_backward_input_bf16_out(dx.bf16, dy.bf16, prepared(), M);
}

void Linear::backward_through_activation(ActKind act, float* dx, Output dx_out, float* dw,
                                         float* db, Rows dz, Rows y, Rows z, float* d_pre, Rows x,
                                         LinearScratch scratch, std::int64_t M) const {
  CHECK(int8_ == nullptr, "int8 products are for inference only");
  if (prepared_ == nullptr) {
    CHECK(dz.f32 != nullptr, "fp32 backward without an fp32 gradient");
    std::memset(d_pre, 0, sizeof(float) * M * N_);  // activation_backward accumulates
    activation_backward(act, d_pre, dz.f32, y.f32, z.f32, M * N_);
    backward(dx, dx_out, dw, db, d_pre, x, scratch, M);
    return;
  }
  // The training forward left act'(y) in y's bf16 slot (activation_forward_bf16_keep_derivative):
  // dy = dz·act'(y) goes straight to bf16 with the bias gradient, never stored in fp32.
  CHECK(dz.bf16 != nullptr && y.bf16 != nullptr, "bf16 backward without bf16 dz and derivative");
  derivative_bias_backward_bf16(db, scratch.dy_bf16, dz.bf16, y.bf16, M, static_cast<int>(N_));
  backward_products(Rows{dx}, dx_out, dw, Rows{nullptr, scratch.dy_bf16}, x, M);
}

}  // namespace bertfit
