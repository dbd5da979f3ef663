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
#include "base/log.h"
#include "gemm/gemm.h"
#include "kernels/kernels.h"

namespace bertfit {
namespace {

template <class T>
void zero(AlignedBuffer<T>& b, std::int64_t n) {
  std::memset(b.data(), 0, n * sizeof(T));
}

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

// One Linear layer's products in the model's precision. In bf16 the input is rounded into
// x_bf16 (kept for the weight gradient) and the weights come prepared (Activations::
// weights_bf16); in fp32 the bf16 arguments are unused (and may be null).
struct Linear {
  bool bf16;

  // The prepared weight, checked to be the (N,K) weight the call describes.
  static const PreparedWeightBf16& prepared(const PreparedWeightBf16* w, std::int64_t K,
                                            std::int64_t N) {
    CHECK(w != nullptr && w->K() == K && w->N() == N, "bf16 product without its (", N, ", ", K,
          ") prepared weight");
    return *w;
  }

  // y (M,N) = x (M,K) · wᵀ + b
  void forward(float* y, const float* x, std::uint16_t* x_bf16, const float* w,
               const PreparedWeightBf16* w_bf16, const float* b, std::int64_t M, std::int64_t K,
               std::int64_t N) const {
    if (!bf16) return linear_forward(y, x, w, b, M, K, N);
    cast_f32_to_bf16(x_bf16, x, M * K);
    linear_forward_bf16(y, x_bf16, prepared(w_bf16, K, N), b, M);
  }

  // bf16 only: y_bf16 (M,N) = bf16(x · wᵀ + b), for outputs read only by bf16-input kernels.
  void forward_to_bf16(std::uint16_t* y_bf16, const float* x, std::uint16_t* x_bf16,
                       const PreparedWeightBf16* w_bf16, const float* b, std::int64_t M,
                       std::int64_t K, std::int64_t N) const {
    cast_f32_to_bf16(x_bf16, x, M * K);
    linear_forward_bf16_out(y_bf16, x_bf16, prepared(w_bf16, K, N), b, M);
  }

  // dx (M,K) += dy·w (= with dx_out kOverwrite: dx's own input gradient is this product
  // alone, and need not be zeroed); dw (N,K) += dyᵀ·x; db (N) += Σ dy. dy_bf16: scratch of M·N.
  void backward(float* dx, Output dx_out, float* dw, float* db, const float* dy,
                std::uint16_t* dy_bf16, const float* x, const std::uint16_t* x_bf16, const float* w,
                const PreparedWeightBf16* w_bf16, std::int64_t M, std::int64_t K,
                std::int64_t N) const {
    if (!bf16) {
      bias_backward(db, dy, M, static_cast<int>(N));
      linear_backward_weight(dw, dy, x, M, K, N);
      linear_backward_input(dx, dy, w, M, K, N, dx_out);
      return;
    }
    bias_backward_cast(db, dy_bf16, dy, M, static_cast<int>(N));  // one pass over dy
    products_backward_bf16(dx, dx_out, dw, dy_bf16, x_bf16, w_bf16, M, K, N);
  }

  // bf16 only: backward's two products from dy already in bf16 (the bias gradient done).
  static void products_backward_bf16(float* dx, Output dx_out, float* dw,
                                     const std::uint16_t* dy_bf16, const std::uint16_t* x_bf16,
                                     const PreparedWeightBf16* w_bf16, std::int64_t M,
                                     std::int64_t K, std::int64_t N) {
    linear_backward_weight_bf16(dw, dy_bf16, x_bf16, M, K, N);
    linear_backward_input_bf16(dx, dy_bf16, prepared(w_bf16, K, N), M, dx_out);
  }
};

// Activations::weights_bf16: per layer qkv, o, ff1, ff2, then the head's two.
enum WeightSlot { kSlotQkv, kSlotO, kSlotFf1, kSlotFf2, kSlotsPerLayer };
std::size_t layer_slot(int layer, WeightSlot w) {
  return static_cast<std::size_t>(layer) * kSlotsPerLayer + w;
}
std::size_t head_slot(const ModelConfig& c, Role r) {
  return layer_slot(c.layers, kSlotQkv) + (r == Role::kClsW ? 1 : 0);
}

// Every matrix-product weight rounded to bf16 and laid out for gemm/ (the backward-input copy
// too when training), from the fp32 parameters: once per forward, as they change every step.
void prepare_weights(const ModelConfig& c, const ParamLayout& lay, const float* params,
                     bool with_backward, std::vector<PreparedWeightBf16>& out) {
  const std::int64_t C = c.hidden, I = c.intermediate;
  out.resize(head_slot(c, Role::kClsW) + 1);
  for (int l = 0; l < c.layers; ++l) {
    // q, k, v weights are adjacent: one (3C,C) weight
    out[layer_slot(l, kSlotQkv)].prepare(params + lay.offset(Role::kQW, l), 3 * C, C,
                                         with_backward);
    out[layer_slot(l, kSlotO)].prepare(params + lay.offset(Role::kOW, l), C, C, with_backward);
    out[layer_slot(l, kSlotFf1)].prepare(params + lay.offset(Role::kFf1W, l), I, C, with_backward);
    out[layer_slot(l, kSlotFf2)].prepare(params + lay.offset(Role::kFf2W, l), C, I, with_backward);
  }
  out[head_slot(c, Role::kPreW)].prepare(params + lay.offset(Role::kPreW), C, C, with_backward);
  out[head_slot(c, Role::kClsW)].prepare(params + lay.offset(Role::kClsW), c.num_labels, C,
                                         with_backward);
}

// One layer's prepared weights (all null in fp32).
struct LayerWeightsBf16 {
  const PreparedWeightBf16 *qkv_w = nullptr, *o_w = nullptr, *ff1_w = nullptr, *ff2_w = nullptr;
};
LayerWeightsBf16 layer_weights_bf16(const Activations& a, bool bf16, int l) {
  if (!bf16) return {};
  const auto& w = a.weights_bf16;
  return {&w[layer_slot(l, kSlotQkv)], &w[layer_slot(l, kSlotO)], &w[layer_slot(l, kSlotFf1)],
          &w[layer_slot(l, kSlotFf2)]};
}

}  // namespace

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::kF32;
  if (name != "bf16") throw_error("--precision must be fp32 or bf16, got '", name, "'");
  if (!has_native_bf16()) {
    log_warn(
        "--precision bf16: this CPU has no native bf16 matrix instructions "
        "(AVX512_BF16 or AMX); using fp32, which is faster here");
    return Precision::kF32;
  }
  return Precision::kBF16;
}

const char* precision_name(Precision p) { return p == Precision::kBF16 ? "bf16" : "fp32"; }

std::vector<std::int64_t> BertModel::grad_ready_offsets() const {
  const ParamLayout& lay = layout_;
  std::vector<std::int64_t> out = {lay.layer_begin(config_.layers)};  // after the head
  for (int l = config_.layers - 1; l >= 0; --l) {
    for (Role r : {Role::kLn2W, Role::kFf2W, Role::kFf1W, Role::kLn1W, Role::kOW})
      out.push_back(lay.offset(r, l));
    out.push_back(lay.layer_begin(l));
  }
  out.push_back(0);  // after the embeddings
  return out;
}

void BertModel::forward(const float* params, const ModelInput& in, const DropoutState& drop,
                        Activations& a) const {
  const ModelConfig& c = config_;
  const ParamLayout& lay = layout_;
  const int B = in.B, T = in.T, C = c.hidden, I = c.intermediate, K = c.num_labels;
  const bool bf16 = precision_ == Precision::kBF16;
  CHECK(T <= c.max_positions, "T ", T, " > max positions ", c.max_positions);
  // Hidden states of every layer are kept in fp32 (backward reads them) and on request.
  const bool keep_hidden = !bf16 || in.full_last_layer;
  const bool for_backward = drop.train || in.for_backward;
  a.resize(c, B, T, for_backward, bf16, keep_hidden);
  a.layout_tokens(in.input_ids, in.token_type_ids, in.attention_mask, in.unpadded);
  a.for_backward = for_backward;
  const std::int64_t N = a.N, padded = std::int64_t{B} * T;
  if (bf16 && !(a.reuse_prepared && a.prepared_from == params &&
                (a.prepared_with_backward || !for_backward))) {
    prepare_weights(c, lay, params, for_backward, a.weights_bf16);
    a.prepared_from = params;
    a.prepared_with_backward = for_backward;
  }
  const Linear linear{bf16};
  auto key = [&](std::uint32_t layer, std::uint32_t site) {
    return dropout_key(drop.seed, drop.step, drop.micro, layer, site);
  };
  const float p_hidden = drop.train ? static_cast<float>(c.hidden_dropout) : 0.0f;
  const float p_attn = drop.train ? static_cast<float>(c.attention_dropout) : 0.0f;
  const float p_cls = drop.train ? static_cast<float>(c.classifier_dropout) : 0.0f;
  const bool bert = c.arch == Arch::kBert;
  const float eps = static_cast<float>(c.layer_norm_eps);
  auto P = [&](Role r, int l = 0) { return params + lay.offset(r, l); };
  auto W = [&](Role r) { return &a.weights_bf16[head_slot(c, r)]; };

  // Embeddings: x0 = Dropout(LN(word + pos (+ type))).
  embedding_forward(a.emb.data(), a.ids.data(), a.positions.data(), bert ? a.types.data() : nullptr,
                    P(Role::kWordEmb), P(Role::kPosEmb), bert ? P(Role::kTypeEmb) : nullptr, N, C);
  float* x0 = keep_hidden ? a.x0.data() : a.shared_hidden.data();
  layernorm_forward(x0, a.emb_mean.data(), a.emb_rstd.data(), a.emb.data(), P(Role::kEmbLnW),
                    P(Role::kEmbLnB), N, C, eps);
  dropout_forward(x0, x0, N * C, p_hidden, key(0, kSiteEmbeddings));

  const AttentionShape shape{B, T, C, c.heads, /*skip_padding_queries=*/a.packed};
  a.cls_only = !in.full_last_layer;
  const float* x = x0;
  for (int l = 0; l < c.layers; ++l) {
    LayerActivations& s = a.layers[l];
    // In bf16 these feed only bf16 products and residual adds (see Activations::shared_hidden):
    // h1 overwrites x once r1 has read it, out overwrites h1 once r2 has.
    float* att = bf16 ? a.shared_att.data() : s.att.data();
    float* h1 = bf16 ? a.shared_hidden.data() : s.h1.data();
    float* out = keep_hidden ? s.out.data() : a.shared_hidden.data();
    const auto w = layer_tensors(lay, params, l);
    const LayerWeightsBf16 wb = layer_weights_bf16(a, bf16, l);
    // Only the first tokens of the last layer reach the head (a.cls_only): its attention
    // computes query row 0 of each sequence, and the rest of the layer runs on those M = B rows.
    const bool first_only = a.cls_only && l == c.layers - 1;
    // Self-attention block: r1 = x + Drop(Attn(x)·Woᵀ + bo); h1 = LN1(r1).
    AttentionShape layer_shape = shape;
    if (first_only) layer_shape.max_queries = 1;
    if (bf16) {
      // qkv feeds only attention, whose products read it as bf16 operands: kept as the
      // product's bf16 output (as autocast's), half the bytes of fp32.
      linear.forward_to_bf16(s.qkv_bf16.data(), x, s.x_bf16.data(), wb.qkv_w, w.qkv_b, N, C, 3 * C);
      if (a.packed) unpack_rows(s.qkv_bf16.data(), a.token_rows.data(), N, padded, 3 * C);
      attention_forward(att, s.probs.data(), s.qkv_bf16.data(), in.attention_mask, layer_shape,
                        p_attn, key(l, kSiteAttentionProbs));
    } else {
      linear.forward(s.qkv.data(), x, nullptr, w.qkv_w, nullptr, w.qkv_b, N, C, 3 * C);
      if (a.packed) unpack_rows(s.qkv.data(), a.token_rows.data(), N, padded, 3 * C);
      attention_forward(att, s.probs.data(), s.qkv.data(), in.attention_mask, layer_shape, p_attn,
                        key(l, kSiteAttentionProbs));
    }
    std::int64_t M = N;
    const float* xr = x;  // the residual input, (M,C)
    if (first_only) {
      M = B;
      pack_rows(att, a.first_rows.data(), B, C);
      gather_rows(a.first_x.data(), x, a.cls_rows.data(), B, C);
      xr = a.first_x.data();
    } else if (a.packed) {
      pack_rows(att, a.token_rows.data(), N, C);
    }
    linear.forward(s.res1.data(), att, s.att_bf16.data(), w.o_w, wb.o_w, w.o_b, M, C, C);
    if (bert) {
      dropout_forward(s.res1.data(), s.res1.data(), M * C, p_hidden, key(l, kSiteAttentionOutput));
    }
    add_forward(s.res1.data(), s.res1.data(), xr, M * C);
    layernorm_forward(h1, s.mean1.data(), s.rstd1.data(), s.res1.data(), w.ln1_w, w.ln1_b, M, C,
                      eps);
    // Feed-forward block: r2 = h1 + Drop(act(h1·W1ᵀ + b1)·W2ᵀ + b2); out = LN2(r2).
    if (bf16) {
      // ff1 feeds only the activation and the activation only the bf16 product (and its weight
      // gradient): both are written as bf16, no fp32 copies (backward reads ff1_bf16).
      linear.forward_to_bf16(s.ff1_bf16.data(), h1, s.h1_bf16.data(), wb.ff1_w, w.ff1_b, M, C, I);
      activation_forward_bf16(act_kind(c.activation), s.act_bf16.data(), s.ff1_bf16.data(), M * I);
      linear_forward_bf16(s.res2.data(), s.act_bf16.data(), Linear::prepared(wb.ff2_w, I, C),
                          w.ff2_b, M);
    } else {
      linear.forward(s.ff1.data(), h1, nullptr, w.ff1_w, nullptr, w.ff1_b, M, C, I);
      activation_forward(act_kind(c.activation), s.act.data(), s.ff1.data(), M * I);
      linear.forward(s.res2.data(), s.act.data(), nullptr, w.ff2_w, nullptr, w.ff2_b, M, I, C);
    }
    dropout_forward(s.res2.data(), s.res2.data(), M * C, p_hidden, key(l, kSiteFfnOutput));
    add_forward(s.res2.data(), s.res2.data(), h1, M * C);
    layernorm_forward(out, s.mean2.data(), s.rstd2.data(), s.res2.data(), w.ln2_w, w.ln2_b, M, C,
                      eps);
    x = out;
  }

  // Head on the first token of each sequence.
  if (a.cls_only) {
    std::memcpy(a.cls.data(), x, sizeof(float) * B * C);  // the last layer ran on those rows
  } else {
    gather_rows(a.cls.data(), x, a.cls_rows.data(), B, C);
  }
  linear.forward(a.pre.data(), a.cls.data(), a.cls_bf16.data(), P(Role::kPreW),
                 bf16 ? W(Role::kPreW) : nullptr, P(Role::kPreB), B, C, C);
  activation_forward(bert ? ActKind::kTanh : ActKind::kRelu, a.pre.data(), a.pre.data(),
                     std::int64_t{B} * C);
  dropout_forward(a.pre_drop.data(), a.pre.data(), std::int64_t{B} * C, p_cls,
                  key(c.layers, kSiteClassifier));
  linear.forward(a.logits.data(), a.pre_drop.data(), a.pre_bf16.data(), P(Role::kClsW),
                 bf16 ? W(Role::kClsW) : nullptr, P(Role::kClsB), B, C, K);
}

double BertModel::loss(const float* labels, float scale, Activations& a) const {
  const int B = a.B, K = config_.num_labels;
  zero(a.dlogits, std::int64_t{B} * K);
  switch (config_.problem()) {
    case ProblemType::kRegression: {
      CHECK(K == 1, "regression needs one output, got ", K);
      double l = mse_forward(a.logits.data(), labels, B);
      mse_backward(a.dlogits.data(), a.logits.data(), labels, B, scale);
      return l;
    }
    case ProblemType::kMultiLabel: {
      double l = bce_with_logits_forward(a.probs.data(), a.logits.data(), labels, B, K);
      bce_with_logits_backward(a.dlogits.data(), a.probs.data(), labels, B, K, scale);
      return l;
    }
    case ProblemType::kSingleLabel:
      break;
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
                         const std::function<void(std::int64_t)>& on_grads_ready) const {
  const ModelConfig& c = config_;
  const ParamLayout& lay = layout_;
  const int B = in.B, T = in.T, C = c.hidden, I = c.intermediate, K = c.num_labels;
  const bool bf16 = precision_ == Precision::kBF16;
  CHECK(a.B == B && a.T == T, "backward on a batch the forward did not see");
  CHECK(a.for_backward,
        "backward after a forward that kept no backward state (set ModelInput::for_backward or "
        "train dropout)");
  const std::int64_t N = a.N, padded = std::int64_t{B} * T;
  const Linear linear{bf16};
  auto key = [&](std::uint32_t layer, std::uint32_t site) {
    return dropout_key(drop.seed, drop.step, drop.micro, layer, site);
  };
  const float p_hidden = drop.train ? static_cast<float>(c.hidden_dropout) : 0.0f;
  const float p_attn = drop.train ? static_cast<float>(c.attention_dropout) : 0.0f;
  const float p_cls = drop.train ? static_cast<float>(c.classifier_dropout) : 0.0f;
  const bool bert = c.arch == Arch::kBert;
  auto P = [&](Role r, int l = 0) { return params + lay.offset(r, l); };
  auto G = [&](Role r, int l = 0) { return grads + lay.offset(r, l); };
  auto W = [&](Role r) { return bf16 ? &a.weights_bf16[head_slot(c, r)] : nullptr; };
  std::uint16_t* dy_bf16 = bf16 ? a.dy_bf16.data() : nullptr;
  // Each call: every gradient at offsets >= `from` is final (the layout is in forward order and
  // backward finishes it from the end: head, then per layer ln2, ff2, ff1, ln1, o, qkv).
  auto ready = [&](std::int64_t from) {
    if (on_grads_ready) on_grads_ready(from);
  };

  // Head, reversed.
  const std::int64_t BC = std::int64_t{B} * C;
  linear.backward(a.d_pre_drop.data(), Output::kOverwrite, G(Role::kClsW), G(Role::kClsB),
                  a.dlogits.data(), dy_bf16, a.pre_drop.data(), a.pre_bf16.data(), P(Role::kClsW),
                  W(Role::kClsW), B, C, K);
  dropout_backward(a.d_pre.data(), a.d_pre_drop.data(), BC, p_cls, key(c.layers, kSiteClassifier));
  // ReLU / tanh backward read their output; the in-place forward left it in a.pre.
  zero(a.d_pre_drop, BC);  // reuse as d(pre-activation)
  activation_backward(bert ? ActKind::kTanh : ActKind::kRelu, a.d_pre_drop.data(), a.d_pre.data(),
                      nullptr, a.pre.data(), BC);
  linear.backward(a.d_cls.data(), Output::kOverwrite, G(Role::kPreW), G(Role::kPreB),
                  a.d_pre_drop.data(), dy_bf16, a.cls.data(), a.cls_bf16.data(), P(Role::kPreW),
                  W(Role::kPreW), B, C, C);
  ready(lay.layer_begin(c.layers));
  if (a.cls_only) {
    std::memcpy(a.d_out.data(), a.d_cls.data(),
                sizeof(float) * BC);  // (B,C): the last layer's rows
  } else {
    zero(a.d_out, N * C);
    scatter_add_rows(a.d_out.data(), a.d_cls.data(), a.cls_rows.data(), B, C);
  }

  const AttentionShape shape{B, T, C, c.heads, /*skip_padding_queries=*/a.packed};
  for (int l = c.layers - 1; l >= 0; --l) {
    LayerActivations& s = a.layers[l];
    const float* x = l == 0 ? a.x0.data() : a.layers[l - 1].out.data();
    const auto w = layer_tensors(lay, params, l);
    const LayerWeightsBf16 wb = layer_weights_bf16(a, bf16, l);
    const auto g = layer_tensors(lay, grads, l);
    const bool first_only = a.cls_only && l == c.layers - 1;
    const std::int64_t M = first_only ? B : N;  // rows after attention (see forward)
    // out = LN2(r2) and r2 = h1 + Drop(f2): d_h1 starts as d_r2, so LN2's backward writes d_r2
    // there; d_f2 = Drop'(d_r2).
    layernorm_backward(a.d_h1.data(), g.ln2_w, g.ln2_b, a.d_out.data(), s.res2.data(), w.ln2_w,
                       s.mean2.data(), s.rstd2.data(), M, C);
    ready(lay.offset(Role::kLn2W, l));
    dropout_backward(a.d_ff2.data(), a.d_h1.data(), M * C, p_hidden, key(l, kSiteFfnOutput));
    // f2 = act·W2ᵀ + b2
    linear.backward(a.d_act.data(), Output::kOverwrite, g.ff2_w, g.ff2_b, a.d_ff2.data(), dy_bf16,
                    bf16 ? nullptr : s.act.data(), s.act_bf16.data(), w.ff2_w, wb.ff2_w, M, I, C);
    ready(lay.offset(Role::kFf2W, l));
    // act = act(ff1). GELU's backward reads ff1; ReLU's reads the output's sign, which is ff1's
    // (y > 0 exactly when x > 0, NaN included), so bf16 (no fp32 output kept) passes ff1.
    // ff1 = h1·W1ᵀ + b1. In bf16, d_ff1 goes straight to bf16 with its bias gradient, never
    // stored in fp32.
    if (bf16) {
      activation_bias_backward_bf16(act_kind(c.activation), g.ff1_b, dy_bf16, a.d_act.data(),
                                    s.ff1_bf16.data(), M, static_cast<int>(I));
      Linear::products_backward_bf16(a.d_h1.data(), Output::kAccumulate, g.ff1_w, dy_bf16,
                                     s.h1_bf16.data(), wb.ff1_w, M, C, I);
    } else {
      zero(a.d_ff1, M * I);
      activation_backward(act_kind(c.activation), a.d_ff1.data(), a.d_act.data(), s.ff1.data(),
                          s.act.data(), M * I);
      linear.backward(a.d_h1.data(), Output::kAccumulate, g.ff1_w, g.ff1_b, a.d_ff1.data(), dy_bf16,
                      s.h1.data(), s.h1_bf16.data(), w.ff1_w, wb.ff1_w, M, C, I);
    }
    ready(lay.offset(Role::kFf1W, l));
    // h1 = LN1(r1) and r1 = x + Drop(att·Woᵀ + bo): d_x starts as d_r1, so LN1's backward
    // writes d_r1 there. The projection's backward reads it before anything adds to d_x.
    layernorm_backward(a.d_in.data(), g.ln1_w, g.ln1_b, a.d_h1.data(), s.res1.data(), w.ln1_w,
                       s.mean1.data(), s.rstd1.data(), M, C);
    ready(lay.offset(Role::kLn1W, l));
    const float* d_proj = a.d_in.data();
    if (bert) {
      dropout_backward(a.d_att_proj.data(), a.d_in.data(), M * C, p_hidden,
                       key(l, kSiteAttentionOutput));
      d_proj = a.d_att_proj.data();
    }
    linear.backward(a.d_att.data(), Output::kOverwrite, g.o_w, g.o_b, d_proj, dy_bf16, s.att.data(),
                    s.att_bf16.data(), w.o_w, wb.o_w, M, C, C);
    ready(lay.offset(Role::kOW, l));
    // att = Attn(qkv), on the padded layout
    AttentionShape layer_shape = shape;
    if (first_only) {
      layer_shape.max_queries = 1;
      // The B rows back to the token rows: d_att to the padded first rows, the residual's
      // gradient d_in to the first tokens' rows (zero elsewhere).
      unpack_rows(a.d_att.data(), a.first_rows.data(), B, padded, C);
      unpack_rows(a.d_in.data(), a.cls_rows.data(), B, N, C);
    } else if (a.packed) {
      unpack_rows(a.d_att.data(), a.token_rows.data(), N, padded, C);
    }
    zero(a.d_qkv, padded * 3 * C);
    if (bf16) {
      attention_backward(a.d_qkv.data(), a.d_att.data(), s.qkv_bf16.data(), s.probs.data(),
                         in.attention_mask, layer_shape, p_attn, key(l, kSiteAttentionProbs));
    } else {
      attention_backward(a.d_qkv.data(), a.d_att.data(), s.qkv.data(), s.probs.data(),
                         in.attention_mask, layer_shape, p_attn, key(l, kSiteAttentionProbs));
    }
    if (a.packed) pack_rows(a.d_qkv.data(), a.token_rows.data(), N, 3 * C);
    // qkv = x·Wqkvᵀ + bqkv
    linear.backward(a.d_in.data(), Output::kAccumulate, g.qkv_w, g.qkv_b, a.d_qkv.data(), dy_bf16,
                    x, s.x_bf16.data(), w.qkv_w, wb.qkv_w, N, C, 3 * C);
    ready(lay.layer_begin(l));
    std::swap(a.d_out, a.d_in);
  }

  // Embeddings, reversed: x0 = Drop(LN(emb)).
  // d(LN output) in place over d_out, then d(emb) into d_in (free after the last swap).
  dropout_backward(a.d_out.data(), a.d_out.data(), N * C, p_hidden, key(0, kSiteEmbeddings));
  layernorm_backward(a.d_in.data(), G(Role::kEmbLnW), G(Role::kEmbLnB), a.d_out.data(),
                     a.emb.data(), P(Role::kEmbLnW), a.emb_mean.data(), a.emb_rstd.data(), N, C);
  embedding_backward(G(Role::kWordEmb), G(Role::kPosEmb), bert ? G(Role::kTypeEmb) : nullptr,
                     a.d_in.data(), a.ids.data(), a.positions.data(),
                     bert ? a.types.data() : nullptr, N, C, c.pad_token_id);
  ready(0);
}

}  // namespace bertfit
