// The embedding head: sentence-transformers' Pooling, Dense and Normalize modules on the last
// layer's token rows (see head.h and pooling.h). Forward and backward in fp32 on the rows as the
// encoder lays them out (packed real tokens, or padded rows of which row_sequence marks the
// padding); the Dense products (a few per batch of sequences) in plain loops.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "kernels/activation.h"
#include "model/head.h"

namespace bertfit {
namespace {

// F.normalize's floor of the norm (l2_norm).
constexpr float kNormEps = 1e-12f;

// The activation kernel of a Dense module's activation (kernels/activation.h); none: identity.
std::optional<ActKind> act_kind(DenseActivation act) {
  switch (act) {
    case DenseActivation::kTanh:
      return ActKind::kTanh;
    case DenseActivation::kRelu:
      return ActKind::kRelu;
    case DenseActivation::kGelu:  // torch.nn.GELU(): the exact (erf) form
      return ActKind::kGelu;
    case DenseActivation::kIdentity:
      break;
  }
  return std::nullopt;
}

// The pooled vector's width (the first Dense module's input).
int pooled_width(const ModelConfig& c) { return static_cast<int>(c.pooling.size()) * c.hidden; }

class PoolingHead final : public Head {
 public:
  void declare(const ModelConfig& c, LayoutBuilder& b) const override {
    CHECK(c.dense.size() <= static_cast<std::size_t>(kMaxDenseModules), "Dense modules ",
          c.dense.size());
    if (c.dense.empty()) return;  // no tensors, no gradient group
    b.group();
    int width = pooled_width(c);
    for (std::size_t i = 0; i < c.dense.size(); ++i) {
      const DenseLayer& d = c.dense[i];
      CHECK(d.in_features == width, "Dense module ", i, " takes ", d.in_features, " values, not ",
            width);
      const std::string module = dense_module_path(i) + ".linear";
      const Role role = dense_role(i);
      b.tensor(module + ".weight", role, {d.out_features, d.in_features}, true, ParamInit::kNormal);
      b.tensor(module + ".bias", dense_bias_role(i), {d.out_features}, false, ParamInit::kZero);
      width = d.out_features;
    }
  }

  bool first_tokens_only(const ModelConfig& /*c*/) const override { return false; }
  bool outputs_per_token() const override { return false; }
  std::string output_weight(const ModelConfig& /*c*/) const override { return ""; }
  int output_width(const ModelConfig& c) const override {
    return c.dense.empty() ? pooled_width(c) : c.dense.back().out_features;
  }
  std::int64_t label_count(const ModelConfig& /*c*/, int /*B*/, int /*T*/) const override {
    return 0;
  }

  void resize(const ModelConfig& c, Activations& a, std::int64_t batch, std::int64_t /*rows*/,
              bool /*training*/, bool /*bf16*/) const override {
    const std::int64_t BD = batch * output_width(c);
    grow(a.head.out, batch * pooled_width(c));  // the pooled vectors
    for (auto* b : {&a.logits, &a.probs, &a.dlogits}) grow(*b, BD);
    HeadActivations& h = a.head;
    h.dense_pre.resize(c.dense.size());
    h.dense_y.resize(c.dense.size());
    for (std::size_t i = 0; i < c.dense.size(); ++i) {
      const std::size_t n = static_cast<std::size_t>(batch) * c.dense[i].out_features;
      if (h.dense_pre[i].size() < n) h.dense_pre[i].resize(n);
      if (h.dense_y[i].size() < n) h.dense_y[i].resize(n);
    }
  }

  void forward(const ModelWeights& w, const DropoutState& /*d*/, Activations& a) const override {
    const ModelConfig& c = w.config();
    CHECK(!c.pooling.empty(), "an embedding head without a pooling mode");
    const int B = a.B, C = c.hidden, D = pooled_width(c);
    const float* x = a.encoder_out(c);
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
    const float* embedded = dense_forward(w, a);
    const int E = output_width(c);
    h.norms.assign(B, 1.0f);
    for (int b = 0; b < B; ++b) {
      const float* in = embedded + std::int64_t{b} * E;
      float* out = a.logits.data() + std::int64_t{b} * E;
      if (!c.normalize) {
        std::memcpy(out, in, sizeof(float) * E);
        continue;
      }
      h.norms[b] = l2_norm(in, E);
      for (int k = 0; k < E; ++k) out[k] = in[k] / h.norms[b];
    }
  }

  void backward(const ModelWeights& w, const DropoutState& /*d*/, float* grads, Activations& a,
                GradsReady& ready) const override {
    const ModelConfig& c = w.config();
    const int B = a.B, C = c.hidden, D = pooled_width(c), E = output_width(c);
    HeadActivations& h = a.head;
    // Through Normalize: y = p / n, dp = (dy − y (y·dy)) / n (n above its floor; else dy / n).
    std::vector<float> de(static_cast<std::size_t>(B) * E);
    for (int b = 0; b < B; ++b) {
      const float* dy = a.dlogits.data() + std::int64_t{b} * E;
      float* g = de.data() + std::int64_t{b} * E;
      if (!c.normalize) {
        std::memcpy(g, dy, sizeof(float) * E);
        continue;
      }
      const float* y = a.logits.data() + std::int64_t{b} * E;
      const float n = h.norms[b];
      double dot = 0;
      if (n > kNormEps) {
        for (int k = 0; k < E; ++k) dot += double{y[k]} * dy[k];
      }
      for (int k = 0; k < E; ++k) g[k] = (dy[k] - y[k] * static_cast<float>(dot)) / n;
    }
    // Through the Dense modules, into the pooled vectors.
    const std::vector<float> dp = dense_backward(w, grads, a, std::move(de));
    if (!c.dense.empty()) ready.done();
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

  // The Dense modules on the pooled vectors (h.out): the last one's output, or the pooled
  // vectors when there are none.
  static const float* dense_forward(const ModelWeights& w, Activations& a) {
    const ModelConfig& c = w.config();
    HeadActivations& h = a.head;
    const float* x = h.out.data();
    int in = pooled_width(c);
    for (std::size_t i = 0; i < c.dense.size(); ++i) {
      const DenseLayer& d = c.dense[i];
      const float* W = w(dense_role(i));
      const float* bias = w(dense_bias_role(i));
      float* pre = h.dense_pre[i].data();
      float* y = h.dense_y[i].data();
      for (int b = 0; b < a.B; ++b) {
        const float* xb = x + std::int64_t{b} * in;
        for (int o = 0; o < d.out_features; ++o) {
          const float* row = W + std::int64_t{o} * in;
          double s = bias[o];
          for (int k = 0; k < in; ++k) s += double{row[k]} * xb[k];
          pre[std::int64_t{b} * d.out_features + o] = static_cast<float>(s);
        }
      }
      const std::int64_t n = std::int64_t{a.B} * d.out_features;
      if (const std::optional<ActKind> k = act_kind(d.activation)) {
        activation_forward(*k, y, pre, n);
      } else {
        std::copy(pre, pre + n, y);
      }
      x = y;
      in = d.out_features;
    }
    return x;
  }

  // From the gradient of the last Dense module's output (or of the pooled vectors when there
  // are none) to that of the pooled vectors; the modules' weight and bias gradients += into
  // grads.
  static std::vector<float> dense_backward(const ModelWeights& w, float* grads, Activations& a,
                                           std::vector<float> dy) {
    const ModelConfig& c = w.config();
    const ParamLayout& lay = w.layout();
    HeadActivations& h = a.head;
    for (std::size_t i = c.dense.size(); i-- > 0;) {
      const DenseLayer& d = c.dense[i];
      const int in = d.in_features, out = d.out_features;
      const float* W = w(dense_role(i));
      float* gW = grads + lay.offset(dense_role(i));
      float* gb = grads + lay.offset(dense_bias_role(i));
      const float* x = i == 0 ? h.out.data() : h.dense_y[i - 1].data();
      std::vector<float> dx(static_cast<std::size_t>(a.B) * in, 0.0f);
      // dpre = dy · act'(pre), by the activation's own backward kernel.
      if (const std::optional<ActKind> k = act_kind(d.activation)) {
        std::vector<float> dpre(dy.size(), 0.0f);
        activation_backward(*k, dpre.data(), dy.data(), h.dense_pre[i].data(), h.dense_y[i].data(),
                            static_cast<std::int64_t>(dy.size()));
        dy = std::move(dpre);
      }
      for (int b = 0; b < a.B; ++b) {
        const float* xb = x + std::int64_t{b} * in;
        float* dxb = dx.data() + std::int64_t{b} * in;
        for (int o = 0; o < out; ++o) {
          const std::int64_t at = std::int64_t{b} * out + o;
          const float g = dy[at];
          if (g == 0.0f) continue;
          gb[o] += g;
          float* gw = gW + std::int64_t{o} * in;
          const float* row = W + std::int64_t{o} * in;
          for (int k = 0; k < in; ++k) {
            gw[k] += g * xb[k];
            dxb[k] += g * row[k];
          }
        }
      }
      dy = std::move(dx);
    }
    return dy;
  }

  double loss(const ModelConfig& /*c*/, const LossOptions& /*o*/, const float* /*labels*/,
              float /*scale*/, Activations& /*a*/) const override {
    // Contrastive losses are over the batch's texts together: the training step's
    // PairObjective (train/pair_objective.h) takes them, never this.
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
