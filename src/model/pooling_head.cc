// The embedding head: sentence-transformers' Pooling (and Normalize) on the last layer's token
// rows (see head.h and pooling.h). Forward and backward in fp32 on the rows as the encoder lays
// them out (packed real tokens, or padded rows of which row_sequence marks the padding).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/check.h"
#include "model/head.h"

namespace bertfit {
namespace {

// F.normalize's floor of the norm (l2_norm).
constexpr float kNormEps = 1e-12f;

class PoolingHead final : public Head {
 public:
  void declare(const ModelConfig& /*c*/, LayoutBuilder& /*b*/) const override {}

  bool first_tokens_only() const override { return false; }
  bool outputs_per_token() const override { return false; }
  std::string output_weight(const ModelConfig& /*c*/) const override { return ""; }
  int output_width(const ModelConfig& c) const override {
    return static_cast<int>(c.pooling.size()) * c.hidden;
  }
  std::int64_t label_count(const ModelConfig& /*c*/, int /*B*/, int /*T*/) const override {
    return 0;
  }

  void resize(const ModelConfig& c, Activations& a, std::int64_t batch, std::int64_t /*rows*/,
              bool /*training*/, bool /*bf16*/) const override {
    const std::int64_t BD = batch * output_width(c);
    grow(a.head.out, BD);  // the pooled vectors before Normalize
    for (auto* b : {&a.logits, &a.probs, &a.dlogits}) grow(*b, BD);
  }

  void forward(const ModelWeights& w, const DropoutState& /*d*/, Activations& a) const override {
    const ModelConfig& c = w.config();
    CHECK(!c.pooling.empty(), "an embedding head without a pooling mode");
    const int B = a.B, C = c.hidden, D = output_width(c);
    const float* x = a.layer_out(c.layers - 1);
    HeadActivations& h = a.head;
    h.counts.assign(B, 0.0f);
    h.last_rows.assign(B, -1);
    for (std::int64_t r = 0; r < a.N; ++r) {
      const std::int32_t b = a.row_sequence[r];
      if (b < 0) continue;
      h.counts[b] += 1;
      h.last_rows[b] = std::max(h.last_rows[b], r);
    }
    float* pooled = h.out.data();
    for (std::size_t m = 0; m < c.pooling.size(); ++m) {
      const Pooling mode = c.pooling[m];
      for (int b = 0; b < B; ++b) {
        float* out = pooled + std::int64_t{b} * D + static_cast<std::int64_t>(m) * C;
        switch (mode) {
          case Pooling::kCls:
            std::memcpy(out, x + a.cls_rows[b] * C, sizeof(float) * C);
            break;
          case Pooling::kLastToken:
            std::memcpy(out, x + h.last_rows[b] * C, sizeof(float) * C);
            break;
          case Pooling::kMax:
          case Pooling::kMean:
          case Pooling::kMeanSqrtLen:
            std::fill_n(out, C,
                        mode == Pooling::kMax ? -std::numeric_limits<float>::infinity() : 0.0f);
            break;
        }
      }
      if (mode == Pooling::kMax) h.max_rows.assign(std::int64_t{B} * C, -1);
      if (mode != Pooling::kMax && mode != Pooling::kMean && mode != Pooling::kMeanSqrtLen) {
        continue;
      }
      // The sums (and maxima) over each sequence's real rows, in row order.
      for (std::int64_t r = 0; r < a.N; ++r) {
        const std::int32_t b = a.row_sequence[r];
        if (b < 0) continue;
        float* out = pooled + std::int64_t{b} * D + static_cast<std::int64_t>(m) * C;
        const float* row = x + r * C;
        if (mode == Pooling::kMax) {
          std::int64_t* at = h.max_rows.data() + std::int64_t{b} * C;
          for (int k = 0; k < C; ++k) {
            if (row[k] > out[k]) {
              out[k] = row[k];
              at[k] = r;
            }
          }
        } else {
          for (int k = 0; k < C; ++k) out[k] += row[k];
        }
      }
      if (mode == Pooling::kMax) continue;
      for (int b = 0; b < B; ++b) {
        float* out = pooled + std::int64_t{b} * D + static_cast<std::int64_t>(m) * C;
        const float n = std::max(h.counts[b], 1e-9f);  // torch.clamp(sum_mask, min=1e-9)
        const float div = mode == Pooling::kMean ? n : std::sqrt(n);
        for (int k = 0; k < C; ++k) out[k] /= div;
      }
    }
    h.norms.assign(B, 1.0f);
    for (int b = 0; b < B; ++b) {
      const float* in = pooled + std::int64_t{b} * D;
      float* out = a.logits.data() + std::int64_t{b} * D;
      if (!c.normalize) {
        std::memcpy(out, in, sizeof(float) * D);
        continue;
      }
      h.norms[b] = l2_norm(in, D);
      for (int k = 0; k < D; ++k) out[k] = in[k] / h.norms[b];
    }
  }

  void backward(const ModelWeights& w, const DropoutState& /*d*/, float* /*grads*/, Activations& a,
                GradsReady& /*ready*/) const override {
    const ModelConfig& c = w.config();
    const int B = a.B, C = c.hidden, D = output_width(c);
    HeadActivations& h = a.head;
    // Through Normalize: y = p / n, dp = (dy − y (y·dy)) / n (n above its floor; else dy / n).
    std::vector<float> dp(static_cast<std::size_t>(B) * D);
    for (int b = 0; b < B; ++b) {
      const float* dy = a.dlogits.data() + std::int64_t{b} * D;
      float* g = dp.data() + std::int64_t{b} * D;
      if (!c.normalize) {
        std::memcpy(g, dy, sizeof(float) * D);
        continue;
      }
      const float* y = a.logits.data() + std::int64_t{b} * D;
      const float n = h.norms[b];
      double dot = 0;
      if (n > kNormEps) {
        for (int k = 0; k < D; ++k) dot += double{y[k]} * dy[k];
      }
      for (int k = 0; k < D; ++k) g[k] = (dy[k] - y[k] * static_cast<float>(dot)) / n;
    }
    // Through pooling, into the last layer's output rows (padding rows get 0).
    float* dx = a.d_out.data();
    std::memset(dx, 0, sizeof(float) * a.N * C);
    for (std::size_t m = 0; m < c.pooling.size(); ++m) {
      const Pooling mode = c.pooling[m];
      auto grad = [&](int b) {
        return dp.data() + std::int64_t{b} * D + static_cast<std::int64_t>(m) * C;
      };
      switch (mode) {
        case Pooling::kCls:
        case Pooling::kLastToken:
          for (int b = 0; b < B; ++b) {
            const std::int64_t r = mode == Pooling::kCls ? a.cls_rows[b] : h.last_rows[b];
            float* row = dx + r * C;
            const float* g = grad(b);
            for (int k = 0; k < C; ++k) row[k] += g[k];
          }
          break;
        case Pooling::kMax:
          for (int b = 0; b < B; ++b) {
            const float* g = grad(b);
            const std::int64_t* at = h.max_rows.data() + std::int64_t{b} * C;
            for (int k = 0; k < C; ++k) dx[at[k] * C + k] += g[k];
          }
          break;
        case Pooling::kMean:
        case Pooling::kMeanSqrtLen:
          for (std::int64_t r = 0; r < a.N; ++r) {
            const std::int32_t b = a.row_sequence[r];
            if (b < 0) continue;
            const float n = std::max(h.counts[b], 1e-9f);
            const float scale = 1.0f / (mode == Pooling::kMean ? n : std::sqrt(n));
            const float* g = grad(b);
            float* row = dx + r * C;
            for (int k = 0; k < C; ++k) row[k] += g[k] * scale;
          }
          break;
      }
    }
  }

  double loss(const ModelConfig& /*c*/, const LossOptions& /*o*/, const float* /*labels*/,
              float /*scale*/, Activations& /*a*/) const override {
    // Contrastive losses are over a batch of pairs, taken by the trainer of embedding models;
    // train refuses an embedding head before it would get here.
    CHECK(false, "an embedding head has no per-example loss");
    return 0;
  }
};

}  // namespace

float l2_norm(const float* v, std::int64_t n) {
  double sq = 0;
  for (std::int64_t k = 0; k < n; ++k) sq += double{v[k]} * v[k];
  return std::max(static_cast<float>(std::sqrt(sq)), kNormEps);
}

const Head& pooling_head() {
  static const PoolingHead head;
  return head;
}

}  // namespace bertfit
