// One encoder layer, forward and backward (see layer.h for the formulas).
#include "model/layer.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/kernels.h"
#include "model/family.h"
#include "model/relative_positions.h"

namespace bertfit {
namespace {

// Pointers to one encoder layer's tensors inside a flat buffer (here: the gradients).
struct LayerTensors {
  float* qkv_w;  // (3C,C): q, k, v weights are adjacent in the layout
  float* qkv_b;  // (3C)
  float *o_w, *o_b, *ln1_w, *ln1_b, *ff1_w, *ff1_b, *ff2_w, *ff2_b, *ln2_w, *ln2_b;
};

// A tensor the config leaves out (a bias, layer 0's attention norm) is nullptr.
LayerTensors layer_tensors(const ParamLayout& lay, float* base, int l) {
  auto p = [&](Role r) { return lay.has(r, l) ? base + lay.offset(r, l) : nullptr; };
  return {p(Role::kQW),   p(Role::kQB),   p(Role::kOW),   p(Role::kOB),
          p(Role::kLn1W), p(Role::kLn1B), p(Role::kFf1W), p(Role::kFf1B),
          p(Role::kFf2W), p(Role::kFf2B), p(Role::kLn2W), p(Role::kLn2B)};
}

// The kernels below read the one form their precision keeps (Activations' views hold one).
// bf16 training replaces x by act'(x) for the backward (Linear::backward_through_activation).
void activate(ActKind kind, Rows out, Rows x, std::int64_t n, bool for_backward) {
  if (x.bf16 != nullptr) {
    if (for_backward) return activation_forward_bf16_keep_derivative(kind, out.bf16, x.bf16, n);
    return activation_forward_bf16(kind, out.bf16, x.bf16, n);
  }
  activation_forward(kind, out.f32, x.f32, n);
}

// The attention variant: plain scaled dot-product attention, or with `rel` DeBERTa's
// disentangled scores (model/relative_positions.h).
void attend(float* out, float* probs, Rows qkv, const LayerRun& run, AttentionShape shape,
            std::uint64_t key, const RelativeScores* rel) {
  if (rel != nullptr) {
    if (qkv.bf16 != nullptr) {
      return attention_forward(out, probs, qkv.bf16, run.mask, shape, run.p_attn, key, *rel);
    }
    return attention_forward(out, probs, qkv.f32, run.mask, shape, run.p_attn, key, *rel);
  }
  if (qkv.bf16 != nullptr) {
    return attention_forward(out, probs, qkv.bf16, run.mask, shape, run.p_attn, key);
  }
  attention_forward(out, probs, qkv.f32, run.mask, shape, run.p_attn, key);
}

// rel: its projections' gradients go to d_pos (P, 2C: pq's | pk's), which it zeroes first.
void attend_backward(float* dqkv, const float* dout, Rows qkv, const float* probs,
                     const LayerRun& run, AttentionShape shape, std::uint64_t key,
                     const RelativeScores* rel, float* d_pos) {
  if (rel != nullptr) {
    std::fill_n(d_pos, rel->P * rel->ld, 0.0f);
    float* d_pq = d_pos;
    float* d_pk = d_pos + rel->ld / 2;
    if (qkv.bf16 != nullptr) {
      return attention_backward(dqkv, dout, qkv.bf16, probs, run.mask, shape, run.p_attn, key, *rel,
                                d_pq, d_pk);
    }
    return attention_backward(dqkv, dout, qkv.f32, probs, run.mask, shape, run.p_attn, key, *rel,
                              d_pq, d_pk);
  }
  if (qkv.bf16 != nullptr) {
    return attention_backward(dqkv, dout, qkv.bf16, probs, run.mask, shape, run.p_attn, key);
  }
  attention_backward(dqkv, dout, qkv.f32, probs, run.mask, shape, run.p_attn, key);
}

// Blockwise attention (kernels/attention_blockwise.h): lse instead of the probabilities.
void attend_blockwise(float* out, float* lse, Rows qkv, const LayerRun& run, AttentionShape shape,
                      std::uint64_t key) {
  if (qkv.bf16 != nullptr) {
    return attention_blockwise_forward(out, lse, qkv.bf16, run.mask, shape, run.p_attn, key);
  }
  attention_blockwise_forward(out, lse, qkv.f32, run.mask, shape, run.p_attn, key);
}

// out: the forward's attention output (padded layout).
void attend_blockwise_backward(float* dqkv, const float* dout, Rows qkv, const float* out,
                               const float* lse, const LayerRun& run, AttentionShape shape,
                               std::uint64_t key) {
  if (qkv.bf16 != nullptr) {
    return attention_blockwise_backward(dqkv, dout, qkv.bf16, out, lse, run.mask, shape, run.p_attn,
                                        key);
  }
  attention_blockwise_backward(dqkv, dout, qkv.f32, out, lse, run.mask, shape, run.p_attn, key);
}

// x's rows from element `at` on (its fp32 and bf16 forms; a quantized slot is per row).
Rows offset(Rows x, std::int64_t at) {
  return {x.f32 != nullptr ? x.f32 + at : nullptr, x.bf16 != nullptr ? x.bf16 + at : nullptr};
}

void unpack(Rows x, const std::int64_t* rows, std::int64_t R, std::int64_t N, int C) {
  if (x.bf16 != nullptr) return unpack_rows(x.bf16, rows, R, N, C);
  unpack_rows(x.f32, rows, R, N, C);
}

// Attention's output (padded rows, in `from`: att itself or another buffer) back to token rows
// in att: the B first tokens (the last layer when the head reads no more) or all N. Returns the
// row count M and the residual input at those rows (x, or its first tokens gathered).
struct TokenRows {
  std::int64_t M;
  const float* residual;
};
TokenRows to_token_rows(Activations& a, const float* from, float* att, const float* x,
                        bool first_only, int C) {
  const int B = a.B;
  if (first_only) {
    if (from != att) {
      gather_rows(att, from, a.first_rows.data(), B, C);
    } else {
      pack_rows(att, a.first_rows.data(), B, C);
    }
    gather_rows(a.first_x.data(), x, a.cls_rows.data(), B, C);
    return {B, a.first_x.data()};
  }
  if (from != att) {
    if (a.packed) {
      gather_rows(att, from, a.token_rows.data(), a.N, C);
    } else {
      std::copy_n(from, std::int64_t{B} * a.T * C, att);
    }
  } else if (a.packed) {
    pack_rows(att, a.token_rows.data(), a.N, C);
  }
  return {a.N, x};
}

// The reverse for a tensor of token rows (C wide), in place: to the padded layout.
void to_padded_rows(Activations& a, float* rows, bool first_only, int C) {
  const std::int64_t padded = std::int64_t{a.B} * a.T;
  if (first_only) {
    unpack_rows(rows, a.first_rows.data(), a.B, padded, C);
  } else if (a.packed) {
    unpack_rows(rows, a.token_rows.data(), a.N, padded, C);
  }
}

// The dropout on the attention output projection, in the families that have it (BERT's
// BertSelfOutput; DistilBERT has none).
float attention_output_dropout(const ModelConfig& c, const LayerRun& run) {
  if (c.attention_output_dropout >= 0) {
    return run.dropout->train ? static_cast<float>(c.attention_output_dropout) : 0.0f;
  }
  return c.family->attention_output_dropout ? run.p_hidden : 0.0f;
}

// The rotary table of layer l's base for T tokens, made once per base and grown with T.
const RotaryTable& rotary_for(const ModelConfig& c, int l, Activations& a) {
  const double theta = c.rotary.theta(l);
  const int D = c.head_dim();
  for (RotaryTable& t : a.rotary_tables) {
    if (t.theta == theta && t.D == D) {
      if (t.T < a.T) t = rotary_table(theta, D, a.T);
      return t;
    }
  }
  a.rotary_tables.push_back(rotary_table(theta, D, a.T));
  return a.rotary_tables.back();
}

// q and k of the padded (B·T, 3C) rows rotated in the form attention reads.
void rotate(const ModelConfig& c, int l, Activations& a, Rows qkv) {
  if (!c.rotary.enabled) return;
  const RotaryTable& t = rotary_for(c, l, a);
  const std::int64_t R = std::int64_t{a.B} * a.T;
  if (qkv.bf16 != nullptr) return rotary_forward(qkv.bf16, t, R, c.hidden, c.heads);
  rotary_forward(qkv.f32, t, R, c.hidden, c.heads);
}

ActKind ffn_activation(const ModelConfig& c) { return activation_kind(c.activation); }

}  // namespace

ActKind activation_kind(Activation a) {
  switch (a) {
    case Activation::kGeluNew:
      return ActKind::kGeluNew;
    case Activation::kRelu:
      return ActKind::kRelu;
    case Activation::kGelu:
      break;
  }
  return ActKind::kGelu;
}

void EncoderLayer::declare(const ModelConfig& c, int l, LayoutBuilder& b) {
  if (c.structure.pre_norm) return declare_pre_norm(c, l, b);
  const LayerNames& n = c.family->layer;
  const std::string prefix = n.prefix + std::to_string(l) + ".";
  const std::int64_t C = c.hidden, I = c.intermediate;
  // [q.w k.w v.w q.b k.b v.b]: one (3C, C) weight and one (3C) bias, a single fused product.
  const std::pair<Role, const char*> qkv[] = {{Role::kQW, n.q}, {Role::kKW, n.k}, {Role::kVW, n.v}};
  b.group();
  for (auto [role, name] : qkv) {
    b.tensor(prefix + name + ".weight", role, {C, C}, true, ParamInit::kNormal);
  }
  for (auto [role, name] : qkv) {
    b.tensor(prefix + name + ".bias", static_cast<Role>(static_cast<int>(role) + 1), {C}, false,
             ParamInit::kZero);
  }
  b.product(Role::kQW, Role::kQB, 3 * C, C, /*quantized=*/true);
  b.group();
  b.linear(prefix + n.o, Role::kOW, C, C, true);
  b.group();
  b.layer_norm(prefix + n.ln1, Role::kLn1W, C);
  b.group();
  b.linear(prefix + n.ff1, Role::kFf1W, I, C, true);
  b.group();
  b.linear(prefix + n.ff2, Role::kFf2W, C, I, true);
  b.group();
  b.layer_norm(prefix + n.ln2, Role::kLn2W, C);
}

// Gradient groups: [LN1, qkv], [o], [LN2, ff1], [ff2]; q|k|v one (3C, C) module when the family
// fuses them (LayerNames::k null), else three adjacent ones.
void EncoderLayer::declare_pre_norm(const ModelConfig& c, int l, LayoutBuilder& b) {
  const LayerNames& n = c.family->layer;
  const LayerStructure& st = c.structure;
  const std::string prefix = n.prefix + std::to_string(l) + ".";
  const std::int64_t C = c.hidden, I = c.intermediate;
  b.group();
  if (l > 0 || st.first_attention_norm) b.layer_norm(prefix + n.ln1, Role::kLn1W, C, st.norm_bias);
  if (n.k == nullptr) {
    b.linear(prefix + n.q, Role::kQW, 3 * C, C, true, st.attention_bias);
  } else {
    const std::pair<Role, const char*> qkv[] = {
        {Role::kQW, n.q}, {Role::kKW, n.k}, {Role::kVW, n.v}};
    for (auto [role, name] : qkv) {
      b.tensor(prefix + name + ".weight", role, {C, C}, true, ParamInit::kNormal);
    }
    if (st.attention_bias) {
      for (auto [role, name] : qkv) {
        b.tensor(prefix + name + ".bias", static_cast<Role>(static_cast<int>(role) + 1), {C}, false,
                 ParamInit::kZero);
      }
    }
    b.product(Role::kQW, st.attention_bias ? Role::kQB : kNoBias, 3 * C, C, true);
  }
  b.group();
  b.linear(prefix + n.o, Role::kOW, C, C, true, st.attention_bias);
  b.group();
  b.layer_norm(prefix + n.ln2, Role::kLn2W, C, st.norm_bias);
  b.linear(prefix + n.ff1, Role::kFf1W, c.ffn_inner(), C, true, st.mlp_bias);
  b.group();
  b.linear(prefix + n.ff2, Role::kFf2W, C, I, true, st.mlp_bias);
}

bool EncoderLayer::has_attention_norm() const {
  return l_ > 0 || w_.config().structure.first_attention_norm;
}

EncoderLayer::EncoderLayer(const ModelWeights& w, int layer)
    : w_(w),
      l_(layer),
      qkv_(w.linear(Role::kQW, layer)),
      o_(w.linear(Role::kOW, layer)),
      ff1_(w.linear(Role::kFf1W, layer)),
      ff2_(w.linear(Role::kFf2W, layer)) {}

bool EncoderLayer::first_tokens_only(const Activations& a) const {
  return a.cls_only && l_ == w_.config().layers - 1;
}

void EncoderLayer::forward(const LayerRun& run, Activations& a) const {
  const ModelConfig& c = w_.config();
  if (c.structure.pre_norm) return forward_pre_norm(run, a);
  const int l = l_, B = a.B, C = c.hidden;
  const std::int64_t N = a.N, I = c.intermediate, padded = std::int64_t{B} * a.T;
  const float eps = static_cast<float>(c.layer_norm_eps);
  const DropoutState& d = *run.dropout;
  auto key = [&](DropoutSite site) { return dropout_key(d.seed, d.step, d.micro, l, site); };
  LayerActivations& s = a.layer(l);
  const Rows x = a.layer_in(l), qkv = a.qkv(l), att = a.att(l), h1 = a.h1(l), ff1 = a.ff1(l),
             act = a.act(l);
  float* out = a.layer_out(l);
  const bool first_only = first_tokens_only(a);

  // a = Attn(x), on the padded layout.
  qkv_.forward(qkv, x, N);
  if (a.packed) unpack(qkv, a.token_rows.data(), N, padded, 3 * C);
  AttentionShape shape = run.shape;
  if (first_only) shape.max_queries = 1;
  RelativeScores rel;
  if (RelativePositions::used(c)) rel = RelativePositions(w_).project(run, l, a);
  attend(att.f32, s.probs.data(), qkv, run, shape, key(kSiteAttentionProbs),
         RelativePositions::used(c) ? &rel : nullptr);
  // Back to token rows: M of them, the B first tokens or all N.
  const auto [M, xr] = to_token_rows(a, att.f32, att.f32, x.f32, first_only, C);
  // r1 = x + Drop(a·Woᵀ + bo); h1 = LN1(r1): one pass after the product (int8: within its
  // last pass, and quantizing h1 for ff1 as it goes, Linear::forward's `then`).
  const float* ln1_w = w_(Role::kLn1W, l);
  const float* ln1_b = w_(Role::kLn1B, l);
  const float p_proj = attention_output_dropout(c, run);
  o_.forward(Rows{s.res1.data()}, att, M, [&](std::int64_t m0, std::int64_t m1) {
    const std::int64_t at = m0 * C;
    dropout_add_layernorm_forward(h1.f32 + at, s.res1.data() + at, s.mean1.data() + m0,
                                  s.rstd1.data() + m0, s.res1.data() + at, xr + at, ln1_w, ln1_b,
                                  m1 - m0, C, eps, p_proj, key(kSiteAttentionOutput), m0);
    ff1_.prepare_input(h1, m0, m1);
  });
  // f = act(h1·W1ᵀ + b1) (int8: f quantized for ff2 as it goes).
  ff1_.forward(ff1, h1, M, [&](std::int64_t m0, std::int64_t m1) {
    activate(activation_kind(c.activation), offset(act, m0 * I), offset(ff1, m0 * I), (m1 - m0) * I,
             a.for_backward);
    ff2_.prepare_input(act, m0, m1);
  });
  // r2 = h1 + Drop(f·W2ᵀ + b2); out = LN2(r2) (int8: out quantized for the next layer's qkv).
  const float* ln2_w = w_(Role::kLn2W, l);
  const float* ln2_b = w_(Role::kLn2B, l);
  // The next layer's qkv product reads out: quantized here for it (every layer's products
  // share one precision, and the quantization depends on the input alone).
  const Rows next_in = l + 1 < c.layers ? a.layer_in(l + 1) : Rows{};
  ff2_.forward(Rows{s.res2.data()}, act, M, [&](std::int64_t m0, std::int64_t m1) {
    const std::int64_t at = m0 * C;
    dropout_add_layernorm_forward(out + at, s.res2.data() + at, s.mean2.data() + m0,
                                  s.rstd2.data() + m0, s.res2.data() + at, h1.f32 + at, ln2_w,
                                  ln2_b, m1 - m0, C, eps, run.p_hidden, key(kSiteFfnOutput), m0);
    qkv_.prepare_input(next_in, m0, m1);
  });
}

void EncoderLayer::backward(const LayerRun& run, float* grads, Activations& a,
                            GradsReady& ready) const {
  const ModelConfig& c = w_.config();
  if (c.structure.pre_norm) return backward_pre_norm(run, grads, a, ready);
  const ParamLayout& lay = w_.layout();
  const int l = l_, B = a.B, C = c.hidden;
  const std::int64_t N = a.N;
  const DropoutState& d = *run.dropout;
  auto key = [&](DropoutSite site) { return dropout_key(d.seed, d.step, d.micro, l, site); };
  LayerActivations& s = a.layer(l);
  const Rows x = a.layer_in(l), qkv = a.qkv(l), att = a.att(l), h1 = a.h1(l), ff1 = a.ff1(l),
             act = a.act(l);
  const LayerTensors g = layer_tensors(lay, grads, l);
  const LinearScratch scratch{a.dy_scratch()};
  const bool first_only = first_tokens_only(a);
  const std::int64_t M = first_only ? B : N;  // rows after attention (see forward)

  // out = LN2(r2), r2 = h1 + Drop(f2), f2 = f·W2ᵀ + b2, in one pass: d_h1 starts as d_r2, and
  // d_f2 (in the form ff2's backward reads) and b2's gradient come with it.
  const Rows d_ff2 = ff2_.grad_form(a.d_ff2.data(), scratch);
  layernorm_dropout_bias_backward(a.d_h1.data(), g.ln2_w, g.ln2_b, d_ff2.f32, d_ff2.bf16, g.ff2_b,
                                  a.d_out.data(), s.res2.data(), w_(Role::kLn2W, l), s.mean2.data(),
                                  s.rstd2.data(), M, C, run.p_hidden, key(kSiteFfnOutput));
  ready.done();
  const Rows d_act = a.d_act_rows();  // fp32, or bf16 alone (the product rounds it once)
  ff2_.backward_products(d_act, Output::kOverwrite, g.ff2_w, d_ff2, act, M);
  ready.done();
  // f = act(h1·W1ᵀ + b1): d_h1 += the product's input gradient
  ff1_.backward_through_activation(activation_kind(c.activation), a.d_h1.data(),
                                   Output::kAccumulate, g.ff1_w, g.ff1_b, d_act, ff1, act,
                                   a.d_ff1.data(), h1, scratch, M);
  ready.done();
  // h1 = LN1(r1), r1 = x + Drop(p), p = a·Woᵀ + bo, in one pass: d_in starts as d_r1, and d_p
  // and bo's gradient come with it. Without dropout there, fp32's d_p is d_r1 itself (d_in):
  // the projection's backward reads it before anything adds to it.
  const float p_proj = attention_output_dropout(c, run);
  const Rows d_proj = o_.grad_form(p_proj != 0.0f ? a.d_att_proj.data() : a.d_in.data(), scratch);
  layernorm_dropout_bias_backward(a.d_in.data(), g.ln1_w, g.ln1_b, d_proj.f32, d_proj.bf16, g.o_b,
                                  a.d_h1.data(), s.res1.data(), w_(Role::kLn1W, l), s.mean1.data(),
                                  s.rstd1.data(), M, C, p_proj, key(kSiteAttentionOutput));
  ready.done();
  o_.backward_products(Rows{a.d_att.data()}, Output::kOverwrite, g.o_w, d_proj, att, M);
  ready.done();
  // a = Attn(qkv), on the padded layout.
  AttentionShape shape = run.shape;
  // d_att to the padded layout; with the first tokens only, the residual's gradient d_in to
  // their rows (zero elsewhere).
  if (first_only) shape.max_queries = 1;
  to_padded_rows(a, a.d_att.data(), first_only, C);
  if (first_only) unpack_rows(a.d_in.data(), a.cls_rows.data(), B, N, C);
  const bool relative = RelativePositions::used(c);
  RelativeScores rel;
  if (relative) rel = RelativePositions(w_).scores(l, a);
  attend_backward(a.d_qkv.data(), a.d_att.data(), qkv, s.probs.data(), run, shape,
                  key(kSiteAttentionProbs), relative ? &rel : nullptr, a.d_rel_pos.data());
  if (relative) RelativePositions(w_).project_backward(run, l, grads, a);
  if (a.packed) pack_rows(a.d_qkv.data(), a.token_rows.data(), N, 3 * C);
  // qkv = x·Wqkvᵀ + bqkv: d_in += the product's input gradient
  qkv_.backward(a.d_in.data(), Output::kAccumulate, g.qkv_w, g.qkv_b, a.d_qkv.data(), x, scratch,
                N);
  ready.done();
}

void EncoderLayer::forward_pre_norm(const LayerRun& run, Activations& a) const {
  const ModelConfig& c = w_.config();
  CHECK(c.structure.gated_ffn, "pre-norm layers have a gated FFN here (ModernBERT's)");
  const int l = l_, B = a.B, C = c.hidden;
  const std::int64_t N = a.N, I = c.intermediate, padded = std::int64_t{B} * a.T;
  const float eps = static_cast<float>(c.layer_norm_eps);
  const DropoutState& d = *run.dropout;
  auto key = [&](DropoutSite site) { return dropout_key(d.seed, d.step, d.micro, l, site); };
  LayerActivations& s = a.layer(l);
  const Rows x = a.layer_in(l), qkv = a.qkv(l), att = a.att(l), h1 = a.h1(l), ff1 = a.ff1(l),
             act = a.act(l);
  float* out = a.layer_out(l);
  const bool first_only = first_tokens_only(a);

  // n1 = LN1(x), or x; no quantized slot: an int8 product quantizes it itself.
  Rows n1{x.f32, x.bf16};
  if (has_attention_norm()) {
    n1.f32 = s.normed.data();
    layernorm_forward(n1.f32, s.mean1.data(), s.rstd1.data(), x.f32, w_(Role::kLn1W, l),
                      w_.maybe(Role::kLn1B, l), N, C, eps);
  }
  // a = Attn(rot(qkv)), on the padded layout.
  qkv_.forward(qkv, n1, N);
  if (a.packed) unpack(qkv, a.token_rows.data(), N, padded, 3 * C);
  rotate(c, l, a, qkv);
  AttentionShape shape = run.shape;
  if (c.rotary.enabled) shape.window = c.rotary.window_half(l);
  if (first_only) shape.max_queries = 1;
  // Blockwise attention's backward reads its output in the padded layout: bf16 training keeps
  // it in att_padded (att is shared by the layers), fp32 unpacks att again.
  const bool blockwise = blockwise_attention(c);
  float* att_padded = blockwise && a.for_backward && a.bf16_now() ? s.att_padded.data() : att.f32;
  if (blockwise) {
    attend_blockwise(att_padded, s.lse.data(), qkv, run, shape, key(kSiteAttentionProbs));
  } else {
    attend(att.f32, s.probs.data(), qkv, run, shape, key(kSiteAttentionProbs), nullptr);
  }
  const auto [M, xr] = to_token_rows(a, att_padded, att.f32, x.f32, first_only, C);
  // h = x + Drop(a·Woᵀ + bo) (res1); LN2(h) into h1, the FFN's input.
  const float* ln2_w = w_(Role::kLn2W, l);
  const float* ln2_b = w_.maybe(Role::kLn2B, l);
  const float p_proj = attention_output_dropout(c, run);
  o_.forward(Rows{s.res1.data()}, att, M, [&](std::int64_t m0, std::int64_t m1) {
    const std::int64_t at = m0 * C;
    dropout_add_layernorm_forward(h1.f32 + at, s.res1.data() + at, s.mean2.data() + m0,
                                  s.rstd2.data() + m0, s.res1.data() + at, xr + at, ln2_w, ln2_b,
                                  m1 - m0, C, eps, p_proj, key(kSiteAttentionOutput), m0);
    ff1_.prepare_input(h1, m0, m1);
  });
  // f = Drop(act(g[:, :I]) · g[:, I:]), g = h1·W1ᵀ + b1.
  ff1_.forward(ff1, h1, M);
  const ActKind kind = ffn_activation(c);
  if (ff1.bf16 != nullptr) {
    gated_activation_forward_bf16(kind, act.bf16, ff1.bf16, M, I, run.p_hidden,
                                  key(kSiteFfnOutput));
  } else {
    gated_activation_forward(kind, act.f32, ff1.f32, M, I, run.p_hidden, key(kSiteFfnOutput));
  }
  ff2_.prepare_input(act, 0, M);
  // out = h + f·W2ᵀ + b2.
  ff2_.forward(Rows{out}, act, M, [&](std::int64_t m0, std::int64_t m1) {
    const std::int64_t at = m0 * C;
    add_forward(out + at, out + at, s.res1.data() + at, (m1 - m0) * C);
  });
}

void EncoderLayer::backward_pre_norm(const LayerRun& run, float* grads, Activations& a,
                                     GradsReady& ready) const {
  const ModelConfig& c = w_.config();
  const ParamLayout& lay = w_.layout();
  const int l = l_, B = a.B, C = c.hidden;
  const std::int64_t N = a.N, I = c.intermediate, F = c.ffn_inner(), padded = std::int64_t{B} * a.T;
  const DropoutState& d = *run.dropout;
  auto key = [&](DropoutSite site) { return dropout_key(d.seed, d.step, d.micro, l, site); };
  LayerActivations& s = a.layer(l);
  const Rows x = a.layer_in(l), qkv = a.qkv(l), att = a.att(l), h1 = a.h1(l), ff1 = a.ff1(l),
             act = a.act(l);
  const LayerTensors g = layer_tensors(lay, grads, l);
  const LinearScratch scratch{a.dy_scratch()};
  const bool first_only = first_tokens_only(a);
  const std::int64_t M = first_only ? B : N;  // rows after attention (see forward)

  // out = h + f·W2ᵀ + b2: d_f from d_out (d_h starts as d_out).
  if (g.ff2_b != nullptr) bias_backward(g.ff2_b, a.d_out.data(), M, C);
  const Rows d_ff2 = ff2_.grad_form(a.d_out.data(), scratch);
  if (d_ff2.bf16 != nullptr) cast_f32_to_bf16(d_ff2.bf16, a.d_out.data(), M * C);
  const Rows d_act = a.d_act_rows();
  ff2_.backward_products(d_act, Output::kOverwrite, g.ff2_w, d_ff2, act, M);
  ready.done();
  // f = Drop(act(g1)·g2): d_g, in the form ff1's backward reads; then d_LN2out (d_h1).
  const ActKind kind = ffn_activation(c);
  Rows d_g{a.d_ff1.data()};
  if (ff1.bf16 != nullptr) {
    d_g = Rows{nullptr, scratch.dy_bf16};
    gated_activation_backward_bf16(kind, d_g.bf16, d_act.bf16, ff1.bf16, M, I, run.p_hidden,
                                   key(kSiteFfnOutput));
    if (g.ff1_b != nullptr) bias_backward_bf16(g.ff1_b, d_g.bf16, M, static_cast<int>(F));
  } else {
    gated_activation_backward(kind, d_g.f32, d_act.f32, ff1.f32, M, I, run.p_hidden,
                              key(kSiteFfnOutput));
    if (g.ff1_b != nullptr) bias_backward(g.ff1_b, d_g.f32, M, static_cast<int>(F));
  }
  ff1_.backward_products(Rows{a.d_h1.data()}, Output::kOverwrite, g.ff1_w, d_g, h1, M);
  // LN2: d_h = d_out + LN2's input gradient (in d_ff2's fp32 buffer).
  float* d_h = a.d_ff2.data();
  layernorm_backward(d_h, g.ln2_w, g.ln2_b, a.d_h1.data(), s.res1.data(), w_(Role::kLn2W, l),
                     s.mean2.data(), s.rstd2.data(), M, C);
  add_forward(d_h, d_h, a.d_out.data(), M * C);
  ready.done();
  // h = x + Drop(a·Woᵀ + bo): the residual's gradient d_h goes to d_in; Wo's from Drop(d_h).
  const float p_proj = attention_output_dropout(c, run);
  const float* d_proj = d_h;
  if (p_proj != 0.0f) {
    dropout_backward(a.d_att_proj.data(), d_h, M * C, p_proj, key(kSiteAttentionOutput));
    d_proj = a.d_att_proj.data();
  }
  o_.backward(a.d_att.data(), Output::kOverwrite, g.o_w, g.o_b, d_proj, att, scratch, M);
  std::copy_n(d_h, M * C, a.d_in.data());
  ready.done();
  // a = Attn(rot(qkv)), on the padded layout.
  AttentionShape shape = run.shape;
  if (c.rotary.enabled) shape.window = c.rotary.window_half(l);
  if (first_only) shape.max_queries = 1;
  to_padded_rows(a, a.d_att.data(), first_only, C);
  if (first_only) unpack_rows(a.d_in.data(), a.cls_rows.data(), B, N, C);
  if (blockwise_attention(c)) {
    // The forward's output in the padded layout: att_padded (bf16), or att unpacked in place
    // (fp32; Wo's backward above was its last reader).
    const float* o = att.f32;
    if (a.bf16_now()) {
      o = s.att_padded.data();
    } else {
      to_padded_rows(a, att.f32, first_only, C);
    }
    attend_blockwise_backward(a.d_qkv.data(), a.d_att.data(), qkv, o, s.lse.data(), run, shape,
                              key(kSiteAttentionProbs));
  } else {
    attend_backward(a.d_qkv.data(), a.d_att.data(), qkv, s.probs.data(), run, shape,
                    key(kSiteAttentionProbs), nullptr, nullptr);
  }
  if (c.rotary.enabled) {
    rotary_backward(a.d_qkv.data(), rotary_for(c, l, a), padded, C, c.heads);
  }
  if (a.packed) pack_rows(a.d_qkv.data(), a.token_rows.data(), N, 3 * C);
  // qkv = n1·Wqkvᵀ + b; n1 = LN1(x) or x: d_in += x's gradient.
  if (!has_attention_norm()) {
    qkv_.backward(a.d_in.data(), Output::kAccumulate, g.qkv_w, g.qkv_b, a.d_qkv.data(), x, scratch,
                  N);
  } else {
    const Rows n1{s.normed.data(), x.bf16};
    qkv_.backward(a.d_h1.data(), Output::kOverwrite, g.qkv_w, g.qkv_b, a.d_qkv.data(), n1, scratch,
                  N);
    layernorm_backward(a.d_ff2.data(), g.ln1_w, g.ln1_b, a.d_h1.data(), x.f32, w_(Role::kLn1W, l),
                       s.mean1.data(), s.rstd1.data(), N, C);
    add_forward(a.d_in.data(), a.d_in.data(), a.d_ff2.data(), N * C);
  }
  ready.done();
}

}  // namespace bertfit
