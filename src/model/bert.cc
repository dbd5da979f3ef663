// Forward and backward of the sequence classifier. Hugging Face semantics:
//   x0 = Dropout(LN(word[ids] + pos[t] (+ type[tt], families with token types)))
//   per layer: see model/layer.h
//   head: logits = Wc · Drop(act(Wp · Drop?(h[:,0]) + bp)) + bc, act the family's (DistilBERT's
//   ReLU, BERT's pooler and RoBERTa's tanh); RoBERTa also drops h[:,0] (Drop?)
#include "model/bert.h"

#include <cstring>

#include "base/check.h"
#include "base/log.h"
#include "gemm/gemm.h"
#include "kernels/kernels.h"
#include "model/family.h"
#include "model/layer.h"

namespace bertfit {
namespace {

// Settings every layer of a pass shares.
LayerRun layer_run(const ModelConfig& c, const ModelInput& in, const DropoutState& drop,
                   const Activations& a) {
  LayerRun run;
  run.shape = AttentionShape{in.B, in.T, c.hidden, c.heads, /*skip_padding_queries=*/a.packed};
  run.mask = in.attention_mask;
  run.dropout = &drop;
  run.p_hidden = drop.train ? static_cast<float>(c.hidden_dropout) : 0.0f;
  run.p_attn = drop.train ? static_cast<float>(c.attention_dropout) : 0.0f;
  return run;
}

std::uint64_t key(const DropoutState& d, int layer, DropoutSite site) {
  return dropout_key(d.seed, d.step, d.micro, static_cast<std::uint32_t>(layer), site);
}

float classifier_dropout(const ModelConfig& c, const DropoutState& d) {
  return d.train ? static_cast<float>(c.classifier_dropout) : 0.0f;
}

// x0 = Dropout(LN(word[ids] + pos[t] (+ type[tt]))).
void embeddings_forward(const ModelWeights& w, const LayerRun& run, Activations& a) {
  const ModelConfig& c = w.config();
  const bool types = c.family->token_types();
  const std::int64_t N = a.N;
  embedding_forward(a.emb.data(), a.ids.data(), a.positions.data(),
                    types ? a.types.data() : nullptr, w(Role::kWordEmb), w(Role::kPosEmb),
                    types ? w(Role::kTypeEmb) : nullptr, N, c.hidden);
  float* x0 = a.embedded();
  layernorm_forward(x0, a.emb_mean.data(), a.emb_rstd.data(), a.emb.data(), w(Role::kEmbLnW),
                    w(Role::kEmbLnB), N, c.hidden, static_cast<float>(c.layer_norm_eps));
  dropout_forward(x0, x0, N * c.hidden, run.p_hidden, key(*run.dropout, 0, kSiteEmbeddings));
}

void embeddings_backward(const ModelWeights& w, const LayerRun& run, float* grads, Activations& a) {
  const ModelConfig& c = w.config();
  const ParamLayout& lay = w.layout();
  const bool types = c.family->token_types();
  const std::int64_t N = a.N;
  auto G = [&](Role r) { return grads + lay.offset(r); };
  // d(LN output) in place over d_out, then d(emb) into d_in.
  dropout_backward(a.d_out.data(), a.d_out.data(), N * c.hidden, run.p_hidden,
                   key(*run.dropout, 0, kSiteEmbeddings));
  layernorm_backward(a.d_in.data(), G(Role::kEmbLnW), G(Role::kEmbLnB), a.d_out.data(),
                     a.emb.data(), w(Role::kEmbLnW), a.emb_mean.data(), a.emb_rstd.data(), N,
                     c.hidden);
  embedding_backward(G(Role::kWordEmb), G(Role::kPosEmb), types ? G(Role::kTypeEmb) : nullptr,
                     a.d_in.data(), a.ids.data(), a.positions.data(),
                     types ? a.types.data() : nullptr, N, c.hidden, c.pad_token_id);
}

// logits = Wc · Drop(act(Wp · h[:,0] + bp)) + bc, act the family's head activation.
void head_forward(const ModelWeights& w, const DropoutState& drop, Activations& a) {
  const ModelConfig& c = w.config();
  const int B = a.B;
  const std::int64_t BC = std::int64_t{B} * c.hidden;
  const float* last = a.layer_out(c.layers - 1);
  if (a.cls_only) {
    std::memcpy(a.cls.data(), last, sizeof(float) * BC);  // the last layer ran on those rows
  } else {
    gather_rows(a.cls.data(), last, a.cls_rows.data(), B, c.hidden);
  }
  if (c.family->head.dropout_before_dense) {
    dropout_forward(a.cls.data(), a.cls.data(), BC, classifier_dropout(c, drop),
                    key(drop, c.layers, kSiteHeadInput));
  }
  w.linear(Role::kPreW).forward(Rows{a.pre.data()}, a.head_in(), B);
  activation_forward(c.family->head.activation, a.pre.data(), a.pre.data(), BC);
  dropout_forward(a.pre_drop.data(), a.pre.data(), BC, classifier_dropout(c, drop),
                  key(drop, c.layers, kSiteClassifier));
  w.linear(Role::kClsW).forward(Rows{a.logits.data()}, a.classifier_in(), B);
}

// From a.dlogits to a.d_out, the gradient w.r.t. the last layer's output rows.
void head_backward(const ModelWeights& w, const DropoutState& drop, float* grads, Activations& a) {
  const ModelConfig& c = w.config();
  const ParamLayout& lay = w.layout();
  const int B = a.B;
  const std::int64_t BC = std::int64_t{B} * c.hidden;
  auto G = [&](Role r) { return grads + lay.offset(r); };
  const LinearScratch scratch{a.dy_scratch()};
  w.linear(Role::kClsW)
      .backward(a.d_pre_drop.data(), Output::kOverwrite, G(Role::kClsW), G(Role::kClsB),
                a.dlogits.data(), a.classifier_in(), scratch, B);
  dropout_backward(a.d_pre.data(), a.d_pre_drop.data(), BC, classifier_dropout(c, drop),
                   key(drop, c.layers, kSiteClassifier));
  // ReLU / tanh backward read their output, which the in-place forward left in a.pre;
  // d_pre_drop is free again and takes d(pre-activation).
  std::memset(a.d_pre_drop.data(), 0, sizeof(float) * BC);
  activation_backward(c.family->head.activation, a.d_pre_drop.data(), a.d_pre.data(), nullptr,
                      a.pre.data(), BC);
  w.linear(Role::kPreW)
      .backward(a.d_cls.data(), Output::kOverwrite, G(Role::kPreW), G(Role::kPreB),
                a.d_pre_drop.data(), a.head_in(), scratch, B);
  if (c.family->head.dropout_before_dense) {
    dropout_backward(a.d_cls.data(), a.d_cls.data(), BC, classifier_dropout(c, drop),
                     key(drop, c.layers, kSiteHeadInput));
  }
  if (a.cls_only) {
    std::memcpy(a.d_out.data(), a.d_cls.data(), sizeof(float) * BC);  // the last layer's rows
  } else {
    std::memset(a.d_out.data(), 0, sizeof(float) * a.N * c.hidden);
    scatter_add_rows(a.d_out.data(), a.d_cls.data(), a.cls_rows.data(), B, c.hidden);
  }
}

}  // namespace

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

void BertModel::forward(const ModelWeights& w, const ModelInput& in, const DropoutState& drop,
                        Activations& a) const {
  const ModelConfig& c = config_;
  const bool bf16 = precision_ == Precision::kBF16;
  const bool for_backward = drop.train || in.for_backward;
  CHECK(in.T <= c.max_tokens(), "T ", in.T, " > the model's ", c.max_tokens(), " positions");
  CHECK(w.prepared() && w.precision() == precision_ && &w.config() == &config_,
        "forward with weights not prepared for this model");
  CHECK(w.with_backward() || !for_backward,
        "a forward that keeps backward state needs weights prepared with_backward");
  CHECK(precision_ != Precision::kInt8 || !for_backward, "int8 is for inference only");
  // Hidden states of every layer are kept for fp32's backward (it reads them) and on request;
  // an inference forward otherwise runs every layer on one layer's buffers.
  a.resize(c, in.B, in.T, for_backward, precision_,
           /*keep_hidden=*/(for_backward && !bf16) || in.full_last_layer);
  a.layout_tokens(c, in.input_ids, in.token_type_ids, in.attention_mask, in.unpadded);
  a.for_backward = for_backward;
  a.cls_only = !in.full_last_layer;
  const LayerRun run = layer_run(c, in, drop, a);
  embeddings_forward(w, run, a);
  for (int l = 0; l < c.layers; ++l) EncoderLayer(w, l).forward(run, a);
  head_forward(w, drop, a);
}

double BertModel::loss(const float* labels, float scale, Activations& a) const {
  const int B = a.B, K = config_.num_labels;
  std::memset(a.dlogits.data(), 0, sizeof(float) * B * K);
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
  const LossOptions& o = loss_options_;
  if (!o.plain()) {
    const double* weights = o.class_weights.empty() ? nullptr : o.class_weights.data();
    const double l = weighted_cross_entropy_forward(a.probs.data(), a.logits.data(), ids.data(), B,
                                                    K, weights, o.label_smoothing);
    weighted_cross_entropy_backward(a.dlogits.data(), a.probs.data(), ids.data(), B, K, weights,
                                    o.label_smoothing, scale);
    return l;
  }
  double l = cross_entropy_forward(a.probs.data(), a.logits.data(), ids.data(), B, K);
  cross_entropy_backward(a.dlogits.data(), a.probs.data(), ids.data(), B, K, scale);
  return l;
}

void BertModel::set_loss_options(LossOptions options) {
  if (!options.plain()) {
    CHECK(config_.problem() == ProblemType::kSingleLabel,
          "loss options are for single-label classification");
  }
  CHECK(options.class_weights.empty() ||
            static_cast<int>(options.class_weights.size()) == config_.num_labels,
        options.class_weights.size(), " class weights for ", config_.num_labels, " labels");
  loss_options_ = std::move(options);
}

void BertModel::backward(const ModelWeights& w, float* grads, const ModelInput& in,
                         const DropoutState& drop, Activations& a,
                         const std::function<void(std::int64_t)>& on_grads_ready) const {
  const ModelConfig& c = config_;
  CHECK(a.B == in.B && a.T == in.T, "backward on a batch the forward did not see");
  CHECK(w.with_backward(), "backward with weights prepared without backward's copies");
  CHECK(a.for_backward,
        "backward after a forward that kept no backward state (set ModelInput::for_backward or "
        "train dropout)");
  // Each call: every gradient at offsets >= `from` is final (the layout is in forward order and
  // backward finishes it from the end).
  auto ready = [&](std::int64_t from) {
    if (on_grads_ready) on_grads_ready(from);
  };
  const LayerRun run = layer_run(c, in, drop, a);
  head_backward(w, drop, grads, a);
  ready(layout_.layer_begin(c.layers));
  for (int l = c.layers - 1; l >= 0; --l) {
    EncoderLayer(w, l).backward(run, grads, a, ready);
    std::swap(a.d_out, a.d_in);
  }
  embeddings_backward(w, run, grads, a);
  ready(0);
}

}  // namespace bertfit
