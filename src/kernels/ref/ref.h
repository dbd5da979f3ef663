// Scalar double-precision references of every kernel in kernels/: the readable specification
// and the oracle of the tests. Same argument order and semantics as the fast kernels (forward
// overwrites, backward accumulates parameter gradients with += and writes the input's gradient
// where the fast kernel does: LayerNorm and dropout), written for clarity, never for speed. Dropout
// masks come from bertfit::dropout_keep, which defines them.
#pragma once

#include <cstdint>

#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/optimizer.h"

namespace bertfit::ref {

// ---- LayerNorm: y = (x - mean) / sqrt(var + eps) · w + b, var biased. x, out: (N,C).
void layernorm_forward(double* out, double* mean, double* rstd, const double* x,
                       const double* weight, const double* bias, std::int64_t N, int C, double eps);
void layernorm_backward(double* dx, double* dweight, double* dbias, const double* dout,
                        const double* x, const double* weight, const double* mean,
                        const double* rstd, std::int64_t N, int C);

// ---- The sublayer ending: res = x + Drop(y), out = LN(res); backward: dres (written), LN's
// parameter gradients (+=), dy = Drop's backward of dres (written), ybias += Σ over rows of dy.
void dropout_add_layernorm_forward(double* out, double* res, double* mean, double* rstd,
                                   const double* y, const double* x, const double* weight,
                                   const double* bias, std::int64_t N, int C, double eps, float p,
                                   std::uint64_t key);
void layernorm_dropout_bias_backward(double* dres, double* dweight, double* dbias, double* dy,
                                     double* ybias, const double* dout, const double* res,
                                     const double* weight, const double* mean, const double* rstd,
                                     std::int64_t N, int C, float p, std::uint64_t key);

// ---- Activations over n elements (backward reads x for GELU kinds, y for ReLU and tanh).
void activation_forward(ActKind kind, double* out, const double* x, std::int64_t n);
void activation_backward(ActKind kind, double* dx, const double* dout, const double* x,
                         const double* y, std::int64_t n);

// ---- Gated activation: x (M, 2I) input | gate; out (M, I) = Drop(act(input) · gate) (dropout
// as dropout_forward on the (M, I) output); dx (M, 2I) written.
void gated_activation_forward(ActKind kind, double* out, const double* x, std::int64_t M,
                              std::int64_t I, float p, std::uint64_t key);
void gated_activation_backward(ActKind kind, double* dx, const double* dout, const double* x,
                               std::int64_t M, std::int64_t I, float p, std::uint64_t key);

// ---- Rotary positions on q and k of qkv (R, 3C) rows, row r at position r % T (rotate_half
// form, f_k = theta^(-2k/D) in double); backward: the inverse rotation of dq, dk in place.
void rotary_forward(double* qkv, double theta, std::int64_t R, int T, int C, int H);
void rotary_backward(double* dqkv, double theta, std::int64_t R, int T, int C, int H);

// ---- Attention on qkv (B,T,3C), mask (B,T); out (B,T,C), probs (B,H,T,T) before dropout.
// With `rel`, DeBERTa's disentangled scores (kernels/attention_relative.h): the content score
// scaled by rel->scale instead of 1/√D, plus rel->scale · q_i·pk[c(i-j)] (c2p) and
// rel->scale · k_j·pq[p(i-j)] (p2c); the backward then adds the projections' gradients into
// d_pos_query / d_pos_key (P, ld).
struct RelativeRef {
  const double* pos_query = nullptr;  // (P, ld)
  const double* pos_key = nullptr;    // (P, ld)
  std::int64_t ld = 0;
  const std::int32_t* c2p_rows = nullptr;  // (2T-1), distance d at [d + T - 1]; null: no c2p
  const std::int32_t* p2c_rows = nullptr;  // likewise; null: no p2c
  double scale = 1.0;
};
void attention_forward(double* out, double* probs, const double* qkv, const std::int32_t* mask,
                       AttentionShape s, float p, std::uint64_t key,
                       const RelativeRef* rel = nullptr);
void attention_backward(double* dqkv, const double* dout, const double* qkv, const double* probs,
                        AttentionShape s, float p, std::uint64_t key,
                        const RelativeRef* rel = nullptr, double* d_pos_query = nullptr,
                        double* d_pos_key = nullptr);

// ---- Dropout: out = keep ? x / (1-p) : 0.
void dropout_forward(double* out, const double* x, std::int64_t n, float p, std::uint64_t key);
void dropout_backward(double* dx, const double* dout, std::int64_t n, float p, std::uint64_t key);

// ---- Elementwise helpers.
void add_forward(double* out, const double* a, const double* b, std::int64_t n);
void bias_backward(double* dbias, const double* dout, std::int64_t N, int M);
void gather_rows(double* out, const double* x, const std::int64_t* row_index, std::int64_t R,
                 int C);
void scatter_add_rows(double* dx, const double* dout, const std::int64_t* row_index, std::int64_t R,
                      int C);

// ---- Embeddings: out = word[id] + pos[position] (+ type[token type]).
void embedding_forward(double* out, const std::int32_t* ids, const std::int32_t* positions,
                       const std::int32_t* types, const double* word, const double* pos,
                       const double* type, std::int64_t N, int C);
void embedding_backward(double* dword, double* dpos, double* dtype, const double* dout,
                        const std::int32_t* ids, const std::int32_t* positions,
                        const std::int32_t* types, std::int64_t N, int C, int pad_id);

// ---- Losses, averaged over the batch.
double cross_entropy_forward(double* probs, const double* logits, const std::int32_t* labels, int B,
                             int K);
void cross_entropy_backward(double* dlogits, const double* probs, const std::int32_t* labels, int B,
                            int K, double scale);
// torch.nn.CrossEntropyLoss(weight, label_smoothing=eps) written term by term: each row's
// -log softmax, the weighted terms, divided by Σ_b w[y_b]. weights nullptr: all 1.
double weighted_cross_entropy_forward(double* probs, const double* logits,
                                      const std::int32_t* labels, int B, int K,
                                      const double* weights, double eps);
void weighted_cross_entropy_backward(double* dlogits, const double* probs,
                                     const std::int32_t* labels, int B, int K,
                                     const double* weights, double eps, double scale);
double mse_forward(const double* pred, const double* target, int B);
// Mean over B·K of -(y log σ(z) + (1-y) log(1-σ(z))), written as the textbook formula.
double bce_with_logits_forward(double* probs, const double* logits, const double* targets, int B,
                               int K);
void bce_with_logits_backward(double* dlogits, const double* probs, const double* targets, int B,
                              int K, double scale);
void mse_backward(double* dpred, const double* pred, const double* target, int B, double scale);

// ---- AdamW in exact arithmetic order of the formula (not torch's float rounding).
void adamw_update(double* param, const double* grad, double* m, double* v, std::int64_t n,
                  const AdamWParams& h, bool decay);
double sum_squares(const double* x, std::int64_t n);

}  // namespace bertfit::ref
