// Forward and backward of the DistilBERT / BERT sequence classifier. Hugging Face semantics:
//   x0 = Dropout(LN(word[ids] + pos[t] (+ type[tt])))
//   per layer: a = Attn(x) (dropout on probabilities); r1 = x + Drop(a·Woᵀ + bo)
//              h1 = LN1(r1); f = act(h1·W1ᵀ + b1); r2 = h1 + Drop(f·W2ᵀ + b2); out = LN2(r2)
//   head (DistilBERT): logits = Wc · Drop(ReLU(Wp · h[:,0] + bp)) + bc
//   head (BERT):       logits = Wc · Drop(tanh(Wp · h[:,0] + bp)) + bc
// DistilBERT has no dropout after the attention output projection (HF's
// MultiHeadSelfAttention drops only the probabilities); BERT has (BertSelfOutput).
// Backward kernels accumulate (+=), so every gradient buffer is zeroed before it is filled.
#include "model/bert.h"

#include <cstring>

#include "base/check.h"
#include "gemm/gemm.h"
#include "kernels/kernels.h"

namespace bertfit {
namespace {

void zero(AlignedBuffer<float>& b, std::int64_t n) { std::memset(b.data(), 0, n * sizeof(float)); }

ActKind act_kind(Activation a) {
  switch (a) {
    case Activation::kGelu:
      return ActKind::kGelu;
    case Activation::kGeluNew:
      return ActKind::kGeluNew;
    case Activation::kRelu:
      return ActKind::kRelu;
  }
  return ActKind::kGelu;
}

// Pointers to one encoder layer's tensors inside a flat buffer (parameters or gradients).
template <class F>
struct LayerTensors {
  F* qkv_w;  // (3C,C): q, k, v weights are adjacent in the layout
  F* qkv_b;  // (3C)
  F *o_w, *o_b, *ln1_w, *ln1_b, *ff1_w, *ff1_b, *ff2_w, *ff2_b, *ln2_w, *ln2_b;
};

template <class F>
LayerTensors<F> layer_tensors(const ParamLayout& lay, F* base, int l) {
  auto p = [&](Role r) { return base + lay.offset(r, l); };
  return {p(Role::kQW),   p(Role::kQB),   p(Role::kOW),   p(Role::kOB),
          p(Role::kLn1W), p(Role::kLn1B), p(Role::kFf1W), p(Role::kFf1B),
          p(Role::kFf2W), p(Role::kFf2B), p(Role::kLn2W), p(Role::kLn2B)};
}

}  // namespace

void BertModel::forward(const float* params, const ModelInput& in, const DropoutState& drop,
                        Activations& a) const {
  const ModelConfig& c = config_;
  const ParamLayout& lay = layout_;
  const int B = in.B, T = in.T, C = c.hidden, I = c.intermediate, K = c.num_labels;
  const std::int64_t N = std::int64_t{B} * T;
  CHECK(T <= c.max_positions, "T ", T, " > max positions ", c.max_positions);
  a.resize(c, B, T, drop.train);
  auto key = [&](std::uint32_t layer, std::uint32_t site) {
    return dropout_key(drop.seed, drop.step, drop.micro, layer, site);
  };
  const float p_hidden = drop.train ? static_cast<float>(c.hidden_dropout) : 0.0f;
  const float p_attn = drop.train ? static_cast<float>(c.attention_dropout) : 0.0f;
  const float p_cls = drop.train ? static_cast<float>(c.classifier_dropout) : 0.0f;
  const bool bert = c.arch == Arch::kBert;
  const float eps = static_cast<float>(c.layer_norm_eps);
  auto P = [&](Role r, int l = 0) { return params + lay.offset(r, l); };

  // Embeddings: x0 = Dropout(LN(word + pos (+ type))).
  std::vector<std::int32_t> zeros;
  const std::int32_t* types = in.token_type_ids;
  if (bert && types == nullptr) {
    zeros.assign(N, 0);
    types = zeros.data();
  }
  embedding_forward(a.emb.data(), in.input_ids, a.positions.data(), bert ? types : nullptr,
                    P(Role::kWordEmb), P(Role::kPosEmb), bert ? P(Role::kTypeEmb) : nullptr, N, C);
  layernorm_forward(a.x0.data(), a.emb_mean.data(), a.emb_rstd.data(), a.emb.data(),
                    P(Role::kEmbLnW), P(Role::kEmbLnB), N, C, eps);
  dropout_forward(a.x0.data(), a.x0.data(), N * C, p_hidden, key(0, kSiteEmbeddings));

  const AttentionShape shape{B, T, C, c.heads};
  const float* x = a.x0.data();
  for (int l = 0; l < c.layers; ++l) {
    LayerActivations& s = a.layers[l];
    const auto w = layer_tensors(lay, params, l);
    // Self-attention block: r1 = x + Drop(Attn(x)·Woᵀ + bo); h1 = LN1(r1).
    linear_forward(s.qkv.data(), x, w.qkv_w, w.qkv_b, N, C, 3 * C);
    attention_forward(s.att.data(), s.probs.data(), s.qkv.data(), in.attention_mask, shape, p_attn,
                      key(l, kSiteAttentionProbs));
    linear_forward(s.res1.data(), s.att.data(), w.o_w, w.o_b, N, C, C);
    if (bert) {
      dropout_forward(s.res1.data(), s.res1.data(), N * C, p_hidden, key(l, kSiteAttentionOutput));
    }
    add_forward(s.res1.data(), s.res1.data(), x, N * C);
    layernorm_forward(s.h1.data(), s.mean1.data(), s.rstd1.data(), s.res1.data(), w.ln1_w, w.ln1_b,
                      N, C, eps);
    // Feed-forward block: r2 = h1 + Drop(act(h1·W1ᵀ + b1)·W2ᵀ + b2); out = LN2(r2).
    linear_forward(s.ff1.data(), s.h1.data(), w.ff1_w, w.ff1_b, N, C, I);
    activation_forward(act_kind(c.activation), s.act.data(), s.ff1.data(), N * I);
    linear_forward(s.res2.data(), s.act.data(), w.ff2_w, w.ff2_b, N, I, C);
    dropout_forward(s.res2.data(), s.res2.data(), N * C, p_hidden, key(l, kSiteFfnOutput));
    add_forward(s.res2.data(), s.res2.data(), s.h1.data(), N * C);
    layernorm_forward(s.out.data(), s.mean2.data(), s.rstd2.data(), s.res2.data(), w.ln2_w, w.ln2_b,
                      N, C, eps);
    x = s.out.data();
  }

  // Head on the first token of each sequence.
  gather_rows(a.cls.data(), x, a.cls_rows.data(), B, C);
  linear_forward(a.pre.data(), a.cls.data(), P(Role::kPreW), P(Role::kPreB), B, C, C);
  activation_forward(bert ? ActKind::kTanh : ActKind::kRelu, a.pre.data(), a.pre.data(),
                     std::int64_t{B} * C);
  dropout_forward(a.pre_drop.data(), a.pre.data(), std::int64_t{B} * C, p_cls,
                  key(c.layers, kSiteClassifier));
  linear_forward(a.logits.data(), a.pre_drop.data(), P(Role::kClsW), P(Role::kClsB), B, C, K);
}

double BertModel::loss(const float* labels, float scale, Activations& a) const {
  const int B = a.B, K = config_.num_labels;
  zero(a.dlogits, std::int64_t{B} * K);
  if (config_.is_regression()) {
    CHECK(K == 1, "regression needs one output, got ", K);
    double l = mse_forward(a.logits.data(), labels, B);
    mse_backward(a.dlogits.data(), a.logits.data(), labels, B, scale);
    return l;
  }
  std::vector<std::int32_t> ids(B);
  for (int b = 0; b < B; ++b) {
    ids[b] = static_cast<std::int32_t>(labels[b]);
    CHECK(ids[b] >= 0 && ids[b] < K, "label ", labels[b], " outside [0,", K, ")");
  }
  double l = cross_entropy_forward(a.probs.data(), a.logits.data(), ids.data(), B, K);
  cross_entropy_backward(a.dlogits.data(), a.probs.data(), ids.data(), B, K, scale);
  return l;
}

void BertModel::backward(const float* params, float* grads, const ModelInput& in,
                         const DropoutState& drop, Activations& a,
                         const std::function<void(int)>& on_layer_done) const {
  const ModelConfig& c = config_;
  const ParamLayout& lay = layout_;
  const int B = in.B, T = in.T, C = c.hidden, I = c.intermediate, K = c.num_labels;
  const std::int64_t N = std::int64_t{B} * T;
  CHECK(a.B == B && a.T == T, "backward on a batch the forward did not see");
  auto key = [&](std::uint32_t layer, std::uint32_t site) {
    return dropout_key(drop.seed, drop.step, drop.micro, layer, site);
  };
  const float p_hidden = drop.train ? static_cast<float>(c.hidden_dropout) : 0.0f;
  const float p_attn = drop.train ? static_cast<float>(c.attention_dropout) : 0.0f;
  const float p_cls = drop.train ? static_cast<float>(c.classifier_dropout) : 0.0f;
  const bool bert = c.arch == Arch::kBert;
  auto P = [&](Role r, int l = 0) { return params + lay.offset(r, l); };
  auto G = [&](Role r, int l = 0) { return grads + lay.offset(r, l); };
  auto done = [&](int l) {
    if (on_layer_done) on_layer_done(l);
  };

  // Head, reversed.
  const std::int64_t BC = std::int64_t{B} * C;
  zero(a.d_pre_drop, BC);
  zero(a.d_pre, BC);
  zero(a.d_cls, BC);
  linear_backward_weight(G(Role::kClsW), a.dlogits.data(), a.pre_drop.data(), B, C, K);
  bias_backward(G(Role::kClsB), a.dlogits.data(), B, K);
  linear_backward_input(a.d_pre_drop.data(), a.dlogits.data(), P(Role::kClsW), B, C, K);
  dropout_backward(a.d_pre.data(), a.d_pre_drop.data(), BC, p_cls, key(c.layers, kSiteClassifier));
  // ReLU / tanh backward read their output; the in-place forward left it in a.pre.
  zero(a.d_pre_drop, BC);  // reuse as d(pre-activation)
  activation_backward(bert ? ActKind::kTanh : ActKind::kRelu, a.d_pre_drop.data(), a.d_pre.data(),
                      nullptr, a.pre.data(), BC);
  linear_backward_weight(G(Role::kPreW), a.d_pre_drop.data(), a.cls.data(), B, C, C);
  bias_backward(G(Role::kPreB), a.d_pre_drop.data(), B, C);
  linear_backward_input(a.d_cls.data(), a.d_pre_drop.data(), P(Role::kPreW), B, C, C);
  done(c.layers);
  zero(a.d_out, N * C);
  scatter_add_rows(a.d_out.data(), a.d_cls.data(), a.cls_rows.data(), B, C);

  const AttentionShape shape{B, T, C, c.heads};
  for (int l = c.layers - 1; l >= 0; --l) {
    LayerActivations& s = a.layers[l];
    const float* x = l == 0 ? a.x0.data() : a.layers[l - 1].out.data();
    const auto w = layer_tensors(lay, params, l);
    const auto g = layer_tensors(lay, grads, l);
    // out = LN2(r2)
    zero(a.d_res2, N * C);
    layernorm_backward(a.d_res2.data(), g.ln2_w, g.ln2_b, a.d_out.data(), s.res2.data(), w.ln2_w,
                       s.mean2.data(), s.rstd2.data(), N, C);
    // r2 = h1 + Drop(f2): d_h1 starts as d_r2; d_f2 = Drop'(d_r2)
    std::memcpy(a.d_h1.data(), a.d_res2.data(), N * C * sizeof(float));
    zero(a.d_ff2, N * C);
    dropout_backward(a.d_ff2.data(), a.d_res2.data(), N * C, p_hidden, key(l, kSiteFfnOutput));
    // f2 = act·W2ᵀ + b2
    linear_backward_weight(g.ff2_w, a.d_ff2.data(), s.act.data(), N, I, C);
    bias_backward(g.ff2_b, a.d_ff2.data(), N, C);
    zero(a.d_act, N * I);
    linear_backward_input(a.d_act.data(), a.d_ff2.data(), w.ff2_w, N, I, C);
    // act = act(ff1)
    zero(a.d_ff1, N * I);
    activation_backward(act_kind(c.activation), a.d_ff1.data(), a.d_act.data(), s.ff1.data(),
                        s.act.data(), N * I);
    // ff1 = h1·W1ᵀ + b1
    linear_backward_weight(g.ff1_w, a.d_ff1.data(), s.h1.data(), N, C, I);
    bias_backward(g.ff1_b, a.d_ff1.data(), N, I);
    linear_backward_input(a.d_h1.data(), a.d_ff1.data(), w.ff1_w, N, C, I);
    // h1 = LN1(r1)
    zero(a.d_res1, N * C);
    layernorm_backward(a.d_res1.data(), g.ln1_w, g.ln1_b, a.d_h1.data(), s.res1.data(), w.ln1_w,
                       s.mean1.data(), s.rstd1.data(), N, C);
    // r1 = x + Drop(att·Woᵀ + bo): d_x starts as d_r1
    std::memcpy(a.d_in.data(), a.d_res1.data(), N * C * sizeof(float));
    const float* d_proj = a.d_res1.data();
    if (bert) {
      zero(a.d_att_proj, N * C);
      dropout_backward(a.d_att_proj.data(), a.d_res1.data(), N * C, p_hidden,
                       key(l, kSiteAttentionOutput));
      d_proj = a.d_att_proj.data();
    }
    linear_backward_weight(g.o_w, d_proj, s.att.data(), N, C, C);
    bias_backward(g.o_b, d_proj, N, C);
    zero(a.d_att, N * C);
    linear_backward_input(a.d_att.data(), d_proj, w.o_w, N, C, C);
    // att = Attn(qkv)
    zero(a.d_qkv, N * 3 * C);
    attention_backward(a.d_qkv.data(), a.d_att.data(), s.qkv.data(), s.probs.data(), shape, p_attn,
                       key(l, kSiteAttentionProbs));
    // qkv = x·Wqkvᵀ + bqkv
    linear_backward_weight(g.qkv_w, a.d_qkv.data(), x, N, C, 3 * C);
    bias_backward(g.qkv_b, a.d_qkv.data(), N, 3 * C);
    linear_backward_input(a.d_in.data(), a.d_qkv.data(), w.qkv_w, N, C, 3 * C);
    done(l);
    std::swap(a.d_out, a.d_in);
  }

  // Embeddings, reversed: x0 = Drop(LN(emb)).
  zero(a.d_res1, N * C);  // reuse as d(LN output)
  dropout_backward(a.d_res1.data(), a.d_out.data(), N * C, p_hidden, key(0, kSiteEmbeddings));
  zero(a.d_res2, N * C);  // reuse as d(emb)
  layernorm_backward(a.d_res2.data(), G(Role::kEmbLnW), G(Role::kEmbLnB), a.d_res1.data(),
                     a.emb.data(), P(Role::kEmbLnW), a.emb_mean.data(), a.emb_rstd.data(), N, C);
  std::vector<std::int32_t> zeros;
  const std::int32_t* types = in.token_type_ids;
  if (bert && types == nullptr) {
    zeros.assign(N, 0);
    types = zeros.data();
  }
  embedding_backward(G(Role::kWordEmb), G(Role::kPosEmb), bert ? G(Role::kTypeEmb) : nullptr,
                     a.d_res2.data(), in.input_ids, a.positions.data(), bert ? types : nullptr, N,
                     C, c.pad_token_id);
  done(-1);
}

}  // namespace bertfit
