// The sequence and token classifier heads (see head.h for the formulas) and the choice of a
// config's head.
#include "model/head.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/kernels.h"
#include "model/family.h"
#include "model/layer.h"

namespace bertfit {
namespace {

// A gradient the layout may leave out (a bias the config has not): nullptr then.
float* maybe_grad(const ParamLayout& lay, float* grads, Role r) {
  return lay.has(r) ? grads + lay.offset(r) : nullptr;
}

// x (B,C) = the mean of each sequence's real token rows of h (N,C), as transformers'
// sum(h · mask) / sum(mask) (ModernBERT's classifier_pooling "mean"); sums in double.
void mean_rows(float* x, const float* h, Activations& a, int C) {
  std::vector<double> sum(static_cast<std::size_t>(a.B) * C, 0.0);
  std::vector<float>& counts = a.head.counts;
  counts.assign(a.B, 0.0f);
  for (std::int64_t r = 0; r < a.N; ++r) {
    const std::int32_t b = a.row_sequence[r];
    if (b < 0) continue;
    counts[b] += 1;
    double* s = sum.data() + static_cast<std::size_t>(b) * C;
    for (int c = 0; c < C; ++c) s[c] += h[r * C + c];
  }
  for (int b = 0; b < a.B; ++b) {
    CHECK(counts[b] > 0, "a sequence without a real token");
    for (int c = 0; c < C; ++c) {
      x[static_cast<std::size_t>(b) * C + c] =
          static_cast<float>(sum[static_cast<std::size_t>(b) * C + c] / counts[b]);
    }
  }
}

// dh (N,C) written: each real row gets its sequence's dx / count, padding rows 0.
void mean_rows_backward(float* dh, const float* dx, const Activations& a, int C) {
  for (std::int64_t r = 0; r < a.N; ++r) {
    const std::int32_t b = a.row_sequence[r];
    float* o = dh + r * C;
    if (b < 0) {
      std::fill_n(o, C, 0.0f);
      continue;
    }
    const float n = a.head.counts[b];
    for (int c = 0; c < C; ++c) o[c] = dx[static_cast<std::size_t>(b) * C + c] / n;
  }
}

class SequenceClassifierHead final : public Head {
 public:
  void declare(const ModelConfig& c, LayoutBuilder& b) const override {
    const ClassifierHeadSpec& h = c.family->head;
    b.group();
    b.linear(h.dense, Role::kPreW, c.pooler_dim(), c.hidden, /*quantized=*/false,
             c.classifier_bias);
    if (h.norm != nullptr)
      b.layer_norm(h.norm, Role::kHeadLnW, c.pooler_dim(), c.structure.norm_bias);
    b.linear(h.out, Role::kClsW, c.num_labels, c.pooler_dim(), /*quantized=*/false);
  }

  bool first_tokens_only(const ModelConfig& c) const override {
    return c.classifier_pooling == Pooling::kCls;
  }
  bool outputs_per_token() const override { return false; }
  std::string output_weight(const ModelConfig& c) const override {
    return std::string(c.family->head.out) + ".weight";
  }
  // A value per sequence, or a multi-hot row of K.
  std::int64_t label_count(const ModelConfig& c, int B, int /*T*/) const override {
    return std::int64_t{B} * (c.problem() == ProblemType::kMultiLabel ? c.num_labels : 1);
  }

  void resize(const ModelConfig& c, Activations& a, std::int64_t batch, std::int64_t /*rows*/,
              bool training, bool bf16) const override {
    // x and its gradient are C wide, the dense output W (pooler_dim) wide: max(C, W) each.
    const std::int64_t BC = batch * std::max(c.hidden, c.pooler_dim()), BK = batch * c.num_labels;
    HeadActivations& h = a.head;
    for (auto* b : {&h.x, &h.pre, &h.act, &h.drop}) grow(*b, BC);
    for (auto* b : {&a.logits, &a.probs, &a.dlogits}) grow(*b, BK);
    if (training) {
      for (auto* b : {&h.d_x, &h.d_pre, &h.d_act}) grow(*b, BC);
    }
    if (c.family->head.norm != nullptr) {
      grow(h.normed, BC);
      grow(h.mean, batch);
      grow(h.rstd, batch);
      if (training) grow(h.d_normed, BC);
    }
    if (bf16) {
      grow(h.x_bf16, BC);
      grow(h.drop_bf16, BC);
      // The dense product's output gradient in bf16 (B, W): W may exceed the layers' widths.
      if (training) grow(a.dy_bf16, BC);
    }
  }

  void forward(const ModelWeights& w, const DropoutState& d, Activations& a) const override {
    const ModelConfig& c = w.config();
    const ClassifierHeadSpec& spec = c.family->head;
    const int B = a.B;
    const std::int64_t BC = std::int64_t{B} * c.hidden, BW = std::int64_t{B} * c.pooler_dim();
    HeadActivations& h = a.head;
    const float* last = a.encoder_out(c);
    if (c.classifier_pooling == Pooling::kMean) {
      mean_rows(h.x.data(), last, a, c.hidden);
    } else if (a.cls_only) {
      std::memcpy(h.x.data(), last, sizeof(float) * BC);  // the last layer ran on those rows
    } else {
      gather_rows(h.x.data(), last, a.cls_rows.data(), B, c.hidden);
    }
    const float p = dropout_p(c, d);
    if (spec.dropout_before_dense) {
      dropout_forward(h.x.data(), h.x.data(), BC, input_dropout_p(c, d),
                      dropout_key(d, c.layers, kSiteHeadInput));
    }
    w.linear(Role::kPreW).forward(Rows{h.pre.data()}, x_rows(a), B);
    activation_forward(activation(c), h.act.data(), h.pre.data(), BW);
    const float* y = h.act.data();
    if (spec.norm != nullptr) {
      layernorm_forward(h.normed.data(), h.mean.data(), h.rstd.data(), y, w(Role::kHeadLnW),
                        w.maybe(Role::kHeadLnB), B, c.pooler_dim(),
                        static_cast<float>(c.layer_norm_eps));
      y = h.normed.data();
    }
    dropout_forward(h.drop.data(), y, BW, p, dropout_key(d, c.layers, kSiteClassifier));
    w.linear(Role::kClsW).forward(Rows{a.logits.data()}, drop_rows(a), B);
  }

  void backward(const ModelWeights& w, const DropoutState& d, float* grads, Activations& a,
                GradsReady& ready) const override {
    const ModelConfig& c = w.config();
    const ClassifierHeadSpec& spec = c.family->head;
    const ParamLayout& lay = w.layout();
    const int B = a.B;
    const std::int64_t BC = std::int64_t{B} * c.hidden, BW = std::int64_t{B} * c.pooler_dim();
    HeadActivations& h = a.head;
    auto G = [&](Role r) { return grads + lay.offset(r); };
    const LinearScratch scratch{a.dy_scratch()};
    const float p = dropout_p(c, d);
    w.linear(Role::kClsW)
        .backward(h.d_act.data(), Output::kOverwrite, G(Role::kClsW), G(Role::kClsB),
                  a.dlogits.data(), drop_rows(a), scratch, B);
    dropout_backward(h.d_act.data(), h.d_act.data(), BW, p,
                     dropout_key(d, c.layers, kSiteClassifier));
    const float* d_act = h.d_act.data();
    if (spec.norm != nullptr) {
      layernorm_backward(h.d_normed.data(), G(Role::kHeadLnW),
                         maybe_grad(lay, grads, Role::kHeadLnB), h.d_act.data(), h.act.data(),
                         w(Role::kHeadLnW), h.mean.data(), h.rstd.data(), B, c.pooler_dim());
      d_act = h.d_normed.data();
    }
    std::memset(h.d_pre.data(), 0, sizeof(float) * BW);
    activation_backward(activation(c), h.d_pre.data(), d_act, h.pre.data(), h.act.data(), BW);
    w.linear(Role::kPreW)
        .backward(h.d_x.data(), Output::kOverwrite, G(Role::kPreW),
                  maybe_grad(lay, grads, Role::kPreB), h.d_pre.data(), x_rows(a), scratch, B);
    if (spec.dropout_before_dense) {
      dropout_backward(h.d_x.data(), h.d_x.data(), BC, input_dropout_p(c, d),
                       dropout_key(d, c.layers, kSiteHeadInput));
    }
    if (c.classifier_pooling == Pooling::kMean) {
      mean_rows_backward(a.d_out.data(), h.d_x.data(), a, c.hidden);
    } else if (a.cls_only) {
      std::memcpy(a.d_out.data(), h.d_x.data(), sizeof(float) * BC);  // the last layer's rows
    } else {
      std::memset(a.d_out.data(), 0, sizeof(float) * a.N * c.hidden);
      scatter_add_rows(a.d_out.data(), h.d_x.data(), a.cls_rows.data(), B, c.hidden);
    }
    ready.done();
  }

  double loss(const ModelConfig& c, const LossOptions& o, const float* labels, float scale,
              Activations& a) const override {
    return rows_loss(c, o, a.logits.data(), a.probs.data(), a.dlogits.data(), labels, a.B, scale);
  }

 private:
  static float dropout_p(const ModelConfig& c, const DropoutState& d) {
    return d.train ? static_cast<float>(c.classifier_dropout) : 0.0f;
  }
  // The dropout on the first token's state: the config's pooler_dropout (DeBERTa), else the
  // classifier's.
  static float input_dropout_p(const ModelConfig& c, const DropoutState& d) {
    if (!d.train) return 0.0f;
    return static_cast<float>(c.pooler_dropout >= 0 ? c.pooler_dropout : c.classifier_dropout);
  }
  // The dense layer's activation: the config's (DeBERTa's pooler_hidden_act), else the family's.
  static ActKind activation(const ModelConfig& c) {
    return c.pooler_activation ? activation_kind(*c.pooler_activation) : c.family->head.activation;
  }
  // The products' inputs, with their bf16 slots in bf16.
  static Rows x_rows(Activations& a) {
    return {a.head.x.data(), a.bf16_now() ? a.head.x_bf16.data() : nullptr};
  }
  static Rows drop_rows(Activations& a) {
    return {a.head.drop.data(), a.bf16_now() ? a.head.drop_bf16.data() : nullptr};
  }
};

// logits = classifier(Drop(h)) on every token row of the last layer; the rows are laid out
// padded, (B·T,K), padding rows 0.
class TokenClassifierHead final : public Head {
 public:
  void declare(const ModelConfig& c, LayoutBuilder& b) const override {
    b.group();
    if (c.family->token_head.dense_and_norm) {
      const ClassifierHeadSpec& h = c.family->head;
      b.linear(h.dense, Role::kPreW, c.hidden, c.hidden, /*quantized=*/false, c.classifier_bias);
      b.layer_norm(h.norm, Role::kHeadLnW, c.hidden, c.structure.norm_bias);
    }
    b.linear(c.family->token_head.out, Role::kClsW, c.num_labels, c.hidden, /*quantized=*/false);
  }

  bool first_tokens_only(const ModelConfig& /*c*/) const override { return false; }
  bool outputs_per_token() const override { return true; }
  std::string output_weight(const ModelConfig& c) const override {
    return std::string(c.family->token_head.out) + ".weight";
  }
  std::int64_t label_count(const ModelConfig& /*c*/, int B, int T) const override {
    return std::int64_t{B} * T;
  }

  void resize(const ModelConfig& c, Activations& a, std::int64_t /*batch*/, std::int64_t rows,
              bool training, bool bf16) const override {
    const std::int64_t RC = rows * c.hidden, RK = rows * c.num_labels;
    HeadActivations& h = a.head;
    grow(h.drop, RC);
    grow(h.out, RK);
    for (auto* b : {&a.logits, &a.probs, &a.dlogits}) grow(*b, RK);
    if (training) {
      grow(h.d_x, RC);
      grow(h.d_out, RK);
    }
    if (bf16) grow(h.drop_bf16, RC);
    if (c.family->token_head.dense_and_norm) {
      for (auto* b : {&h.pre, &h.act, &h.normed}) grow(*b, RC);
      grow(h.mean, rows);
      grow(h.rstd, rows);
      if (training) {
        for (auto* b : {&h.d_pre, &h.d_act, &h.d_normed}) grow(*b, RC);
      }
      if (bf16) grow(h.x_bf16, RC);
    }
  }

  void forward(const ModelWeights& w, const DropoutState& d, Activations& a) const override {
    const ModelConfig& c = w.config();
    const std::int64_t N = a.N, K = c.num_labels;
    HeadActivations& h = a.head;
    const float* y = a.encoder_out(c);
    if (c.family->token_head.dense_and_norm) {
      // norm(act(dense(h))) on every row (ModernBERT's prediction head).
      w.linear(Role::kPreW).forward(Rows{h.pre.data()}, dense_input(c, a), N);
      activation_forward(activation(c), h.act.data(), h.pre.data(), N * c.hidden);
      layernorm_forward(h.normed.data(), h.mean.data(), h.rstd.data(), h.act.data(),
                        w(Role::kHeadLnW), w.maybe(Role::kHeadLnB), N, c.hidden,
                        static_cast<float>(c.layer_norm_eps));
      y = h.normed.data();
    }
    dropout_forward(h.drop.data(), y, N * c.hidden, dropout_p(c, d),
                    dropout_key(d, c.layers, kSiteClassifier));
    if (!a.packed) {
      w.linear(Role::kClsW).forward(Rows{a.logits.data()}, drop_rows(a), N);
      return;
    }
    w.linear(Role::kClsW).forward(Rows{h.out.data()}, drop_rows(a), N);
    const std::int64_t padded = std::int64_t{a.B} * a.T;
    std::memset(a.logits.data(), 0, sizeof(float) * padded * K);
    for (std::int64_t r = 0; r < N; ++r) {
      std::memcpy(a.logits.data() + a.token_rows[r] * K, h.out.data() + r * K, sizeof(float) * K);
    }
  }

  void backward(const ModelWeights& w, const DropoutState& d, float* grads, Activations& a,
                GradsReady& ready) const override {
    const ModelConfig& c = w.config();
    const ParamLayout& lay = w.layout();
    const std::int64_t N = a.N, K = c.num_labels;
    HeadActivations& h = a.head;
    const float* dy = a.dlogits.data();
    if (a.packed) {
      for (std::int64_t r = 0; r < N; ++r) {
        std::memcpy(h.d_out.data() + r * K, a.dlogits.data() + a.token_rows[r] * K,
                    sizeof(float) * K);
      }
      dy = h.d_out.data();
    }
    w.linear(Role::kClsW)
        .backward(h.d_x.data(), Output::kOverwrite, grads + lay.offset(Role::kClsW),
                  grads + lay.offset(Role::kClsB), dy, drop_rows(a), LinearScratch{a.dy_scratch()},
                  N);
    if (!c.family->token_head.dense_and_norm) {
      dropout_backward(a.d_out.data(), h.d_x.data(), N * c.hidden, dropout_p(c, d),
                       dropout_key(d, c.layers, kSiteClassifier));
      ready.done();
      return;
    }
    const std::int64_t NC = N * c.hidden;
    dropout_backward(h.d_act.data(), h.d_x.data(), NC, dropout_p(c, d),
                     dropout_key(d, c.layers, kSiteClassifier));
    layernorm_backward(h.d_normed.data(), grads + lay.offset(Role::kHeadLnW),
                       maybe_grad(lay, grads, Role::kHeadLnB), h.d_act.data(), h.act.data(),
                       w(Role::kHeadLnW), h.mean.data(), h.rstd.data(), N, c.hidden);
    std::memset(h.d_pre.data(), 0, sizeof(float) * NC);
    activation_backward(activation(c), h.d_pre.data(), h.d_normed.data(), h.pre.data(),
                        h.act.data(), NC);
    w.linear(Role::kPreW)
        .backward(a.d_out.data(), Output::kOverwrite, grads + lay.offset(Role::kPreW),
                  maybe_grad(lay, grads, Role::kPreB), h.d_pre.data(), dense_input(c, a),
                  LinearScratch{a.dy_scratch()}, N);
    ready.done();
  }

  // Cross-entropy over the positions whose label is not -100, as transformers' CrossEntropyLoss
  // (ignore_index -100): the labelled rows gathered, their loss taken by rows_loss, the gradient
  // and probabilities scattered back (0 elsewhere).
  double loss(const ModelConfig& c, const LossOptions& o, const float* labels, float scale,
              Activations& a) const override {
    const int K = c.num_labels;
    const std::int64_t padded = std::int64_t{a.B} * a.T;
    std::vector<std::int64_t> rows;
    for (std::int64_t p = 0; p < padded; ++p) {
      if (labels[p] != kIgnoredLabel) rows.push_back(p);
    }
    const int M = static_cast<int>(rows.size());
    CHECK(M > 0, "a token-classification batch without a labelled token");
    std::vector<float> logits(static_cast<std::size_t>(M) * K), probs(logits.size()),
        dlogits(logits.size()), row_labels(M);
    for (int m = 0; m < M; ++m) {
      std::memcpy(&logits[static_cast<std::size_t>(m) * K], a.logits.data() + rows[m] * K,
                  sizeof(float) * K);
      row_labels[m] = labels[rows[m]];
    }
    const double l =
        rows_loss(c, o, logits.data(), probs.data(), dlogits.data(), row_labels.data(), M, scale);
    std::memset(a.dlogits.data(), 0, sizeof(float) * padded * K);
    std::memset(a.probs.data(), 0, sizeof(float) * padded * K);
    for (int m = 0; m < M; ++m) {
      std::memcpy(a.dlogits.data() + rows[m] * K, &dlogits[static_cast<std::size_t>(m) * K],
                  sizeof(float) * K);
      std::memcpy(a.probs.data() + rows[m] * K, &probs[static_cast<std::size_t>(m) * K],
                  sizeof(float) * K);
    }
    return l;
  }

 private:
  static float dropout_p(const ModelConfig& c, const DropoutState& d) {
    if (!d.train) return 0.0f;
    return static_cast<float>(c.family->token_head.hidden_dropout ? c.hidden_dropout
                                                                  : c.classifier_dropout);
  }
  static Rows drop_rows(Activations& a) {
    return {a.head.drop.data(), a.bf16_now() ? a.head.drop_bf16.data() : nullptr};
  }
  // The prediction head's dense input: the encoder's rows, with their bf16 slot in bf16.
  static Rows dense_input(const ModelConfig& c, Activations& a) {
    return {a.encoder_out(c), a.bf16_now() ? a.head.x_bf16.data() : nullptr};
  }
  static ActKind activation(const ModelConfig& c) {
    return c.pooler_activation ? activation_kind(*c.pooler_activation) : c.family->head.activation;
  }
};

}  // namespace

const Head& model_head(const ModelConfig& c) {
  static const SequenceClassifierHead sequence_classifier;
  static const TokenClassifierHead token_classifier;
  switch (c.head) {
    case HeadKind::kSequenceClassification:
      return sequence_classifier;
    case HeadKind::kTokenClassification:
      return token_classifier;
    case HeadKind::kEmbedding:
      return pooling_head();
  }
  CHECK(false, "head kind ", static_cast<int>(c.head));
  return sequence_classifier;
}

}  // namespace bertfit
