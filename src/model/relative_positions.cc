// The relative-positions component (see relative_positions.h for the formulas).
#include "model/relative_positions.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "kernels/kernels.h"
#include "model/family.h"
#include "model/linear.h"

namespace bertfit {
namespace {

// Layer l's query and key products over the relative embeddings: the first 2C rows of its
// fused q|k|v weight and bias, in fp32 whatever the model's precision (P rows: a small product,
// and the positions' scores keep full precision).
Linear qk_product(const ModelWeights& w, int l) {
  const std::int64_t C = w.config().hidden;
  return Linear(w(Role::kQW, l), w(Role::kQB, l), static_cast<const PreparedWeightBf16*>(nullptr),
                2 * C, C);
}

std::uint64_t drop_key(const LayerRun& run, int l) {
  return dropout_key(*run.dropout, l, kSiteRelativeEmbeddings);
}

}  // namespace

int log_bucket_position(int distance, int bucket_size, int max_position) {
  const int mid = bucket_size / 2;
  const int abs_pos = distance < mid && distance > -mid ? mid - 1 : std::abs(distance);
  if (abs_pos <= mid) return distance;
  // torch: ceil(log(abs / mid) / log(tensor((max - 1) / mid)) * (mid - 1)) + mid, in float32.
  const float ratio = static_cast<float>(abs_pos) / static_cast<float>(mid);
  const float base = std::log(static_cast<float>(static_cast<double>(max_position - 1) / mid));
  const float log_pos =
      std::ceil(std::log(ratio) / base * static_cast<float>(mid - 1)) + static_cast<float>(mid);
  return (distance > 0 ? 1 : -1) * static_cast<int>(log_pos);
}

std::vector<std::int32_t> relative_rows(const ModelConfig& c, int T, bool p2c) {
  const RelativeAttentionConfig& r = c.relative;
  const int span = r.span(c.max_positions), max_distance = r.max_distance(c.max_positions);
  auto bucket = [&](int d) {
    return r.buckets > 0 && max_distance > 0 ? log_bucket_position(d, r.buckets, max_distance) : d;
  };
  std::vector<std::int32_t> rows(2 * static_cast<std::size_t>(T) - 1);
  for (int d = -(T - 1); d <= T - 1; ++d) {
    // c2p: relative_pos[i][j] = bucket(i - j); p2c: -r_pos[j][i] = -bucket(j - i).
    const int at = p2c ? -bucket(-d) : bucket(d);
    rows[d + T - 1] = std::clamp(at + span, 0, 2 * span - 1);
  }
  return rows;
}

void RelativePositions::declare(const ModelConfig& c, LayoutBuilder& b) {
  const RelativeNames& n = c.family->relative;
  CHECK(n.embeddings != nullptr, c.family->model_type, " declares no relative embeddings");
  b.group();
  b.embedding(std::string(n.embeddings) + ".weight", Role::kRelEmb, rows(c), c.hidden);
  if (c.relative.layer_norm) b.layer_norm(n.layer_norm, Role::kRelLnW, c.hidden);
}

void RelativePositions::resize(const ModelConfig& c, Activations& a, bool training) {
  const std::int64_t P = rows(c), C = c.hidden;
  grow(a.rel, P * C);
  grow(a.rel_mean, P);
  grow(a.rel_rstd, P);
  const std::size_t per_layer = training ? static_cast<std::size_t>(c.layers) : 1;
  if (a.rel_pos.size() < per_layer) a.rel_pos.resize(per_layer);
  for (auto& buf : a.rel_pos) grow(buf, P * 2 * C);
  if (!training) return;
  if (a.rel_drop.size() < per_layer) a.rel_drop.resize(per_layer);
  for (auto& buf : a.rel_drop) grow(buf, P * C);
  grow(a.d_rel, P * C);
  grow(a.d_rel_in, P * C);
  grow(a.d_rel_pos, P * 2 * C);
}

namespace {

// rel (P,C) = LN(rel_embeddings), or the table itself without norm_rel_ebd.
void normalize_table(const ModelWeights& w, float* rel, float* mean, float* rstd) {
  const ModelConfig& c = w.config();
  const std::int64_t P = RelativePositions::rows(c), C = c.hidden;
  if (c.relative.layer_norm) {
    layernorm_forward(rel, mean, rstd, w(Role::kRelEmb), w(Role::kRelLnW), w(Role::kRelLnB), P,
                      static_cast<int>(C), static_cast<float>(c.layer_norm_eps));
  } else {
    std::memcpy(rel, w(Role::kRelEmb), sizeof(float) * P * C);
  }
}

}  // namespace

void RelativePositions::forward(Activations& a) const {
  normalize_table(w_, a.rel.data(), a.rel_mean.data(), a.rel_rstd.data());
  const ModelConfig& c = w_.config();
  a.rel_c2p_rows = relative_rows(c, a.T, /*p2c=*/false);
  a.rel_p2c_rows = relative_rows(c, a.T, /*p2c=*/true);
}

RelativeScores RelativePositions::project(const LayerRun& run, int l, Activations& a) const {
  const ModelConfig& c = w_.config();
  const std::int64_t P = rows(c), C = c.hidden;
  if (run.p_hidden == 0.0f && w_.relative_projection(l) != nullptr) {
    return scores_at(w_.relative_projection(l), a);
  }
  float* in = a.rel.data();
  if (run.p_hidden > 0.0f) {  // StableDropout(hidden_dropout_prob) on the embeddings, per layer
    in = a.rel_drop_of(l);
    dropout_forward(in, a.rel.data(), P * C, run.p_hidden, drop_key(run, l));
  }
  qk_product(w_, l).forward(Rows{a.rel_pos_of(l)}, Rows{in}, P);
  return scores(l, a);
}

void RelativePositions::project_all(AlignedBuffer<float>& out) const {
  const ModelConfig& c = w_.config();
  const std::int64_t P = rows(c), C = c.hidden;
  AlignedBuffer<float> rel(static_cast<std::size_t>(P * C)), mean(static_cast<std::size_t>(P)),
      rstd(static_cast<std::size_t>(P));
  normalize_table(w_, rel.data(), mean.data(), rstd.data());
  const auto n = static_cast<std::size_t>(c.layers * P * 2 * C);
  if (out.size() != n) out.resize(n);
  for (int l = 0; l < c.layers; ++l) {
    qk_product(w_, l).forward(Rows{out.data() + l * P * 2 * C}, Rows{rel.data()}, P);
  }
}

RelativeScores RelativePositions::scores(int l, Activations& a) const {
  return scores_at(a.rel_pos_of(l), a);
}

RelativeScores RelativePositions::scores_at(const float* pos, Activations& a) const {
  const ModelConfig& c = w_.config();
  const RelativeAttentionConfig& r = c.relative;
  const double types = 1.0 + (r.c2p ? 1 : 0) + (r.p2c ? 1 : 0);
  return {pos,
          pos + c.hidden,
          2 * static_cast<std::int64_t>(c.hidden),
          rows(c),
          r.c2p ? a.rel_c2p_rows.data() : nullptr,
          r.p2c ? a.rel_p2c_rows.data() : nullptr,
          static_cast<float>(1.0 / std::sqrt(c.head_dim() * types))};
}

void RelativePositions::project_backward(const LayerRun& run, int l, float* grads,
                                         Activations& a) const {
  const ModelConfig& c = w_.config();
  const ParamLayout& lay = w_.layout();
  const std::int64_t P = rows(c), C = c.hidden;
  const bool dropped = run.p_hidden > 0.0f;
  // Backward meets the last layer first: its input gradient starts a.d_rel.
  const bool first = l == c.layers - 1;
  float* dx = dropped ? a.d_rel_in.data() : a.d_rel.data();
  const Output out = dropped || first ? Output::kOverwrite : Output::kAccumulate;
  Rows in{dropped ? a.rel_drop_of(l) : a.rel.data()};
  qk_product(w_, l).backward(dx, out, grads + lay.offset(Role::kQW, l),
                             grads + lay.offset(Role::kQB, l), a.d_rel_pos.data(), in,
                             LinearScratch{}, P);
  if (!dropped) return;
  dropout_backward(dx, dx, P * C, run.p_hidden, drop_key(run, l));
  if (first) {
    std::memcpy(a.d_rel.data(), dx, sizeof(float) * P * C);
  } else {
    add_forward(a.d_rel.data(), a.d_rel.data(), dx, P * C);
  }
}

void RelativePositions::backward(float* grads, Activations& a, GradsReady& ready) const {
  const ModelConfig& c = w_.config();
  const ParamLayout& lay = w_.layout();
  const std::int64_t P = rows(c), C = c.hidden;
  float* g_emb = grads + lay.offset(Role::kRelEmb);
  const float* d_table = a.d_rel.data();
  if (c.relative.layer_norm) {
    layernorm_backward(a.d_rel_in.data(), grads + lay.offset(Role::kRelLnW),
                       grads + lay.offset(Role::kRelLnB), a.d_rel.data(), w_(Role::kRelEmb),
                       w_(Role::kRelLnW), a.rel_mean.data(), a.rel_rstd.data(), P,
                       static_cast<int>(C));
    d_table = a.d_rel_in.data();
  }
  add_forward(g_emb, g_emb, d_table, P * C);
  ready.done();
}

}  // namespace bertfit
