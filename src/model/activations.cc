// Sizing of the activation and backward-scratch buffers (the embeddings' and the head's through
// their components).
#include "model/activations.h"

#include <algorithm>
#include <utility>

#include "base/check.h"
#include "model/embeddings.h"
#include "model/family.h"
#include "model/head.h"
#include "model/relative_positions.h"

namespace bertfit {

void Activations::resize(const ModelConfig& c, int batch, int tokens, bool for_training,
                         Precision precision, bool keep_hidden) {
  const bool bf16 = precision == Precision::kBF16, int8 = precision == Precision::kInt8;
  B = batch;
  T = tokens;
  const std::int64_t N = std::int64_t{batch} * tokens;
  const std::int64_t C = c.hidden, I = c.intermediate, F = c.ffn_inner(), H = c.heads;
  const bool gated = c.structure.gated_ffn, pre_norm = c.structure.pre_norm;
  // Per layer: the probabilities (B,H,T,T), or blockwise each row's log-sum-exp (B,H,T).
  const bool blockwise = blockwise_attention(c);
  const std::int64_t attn = std::int64_t{batch} * H * tokens * (blockwise ? 1 : tokens);
  const bool need_f32 = !bf16, need_hidden = keep_hidden;
  const bool share = !for_training && !keep_hidden;
  if (RelativePositions::used(c)) RelativePositions::resize(c, *this, for_training);
  // Attention reads a bf16 qkv in bf16, and in int8 where the CPU has native bf16 products
  // (int8's qkv product rounds its output into it); int8's fp32 output then goes to ff1's
  // buffer, which nothing reads before ff1's own product.
  const bool qkv16 = bf16 || (int8 && has_native_bf16());
  const bool qkv_in_ff1 = int8 && qkv16 && I >= 3 * C;
  const bool need_qkv32 = need_f32 && !qkv_in_ff1;
  bf16_now_ = bf16;
  int8_now_ = int8;
  training_now_ = for_training;
  qkv16_now_ = qkv16;
  qkv_in_ff1_now_ = qkv_in_ff1;
  keep_hidden_now_ = need_hidden;
  gated_now_ = gated;
  share_layers_now_ = share;
  if (N <= capacity_rows_ && attn <= capacity_attn_ && batch <= capacity_batch_ &&
      (training_ || !for_training) && (bf16_ || !bf16) && (int8_ || !int8) && (qkv16_ || !qkv16) &&
      (!need_f32 || f32_rows_ >= N) && (!need_qkv32 || qkv32_rows_ >= N) &&
      (!need_hidden || hidden_rows_ >= N) && (need_hidden || shared_rows_ >= N) &&
      (share || all_layers_) && static_cast<int>(layers.size()) == c.layers) {
    return;
  }
  capacity_rows_ = std::max(capacity_rows_, N);
  capacity_attn_ = std::max(capacity_attn_, attn);
  capacity_batch_ = std::max(capacity_batch_, batch);
  training_ = training_ || for_training;
  bf16_ = bf16_ || bf16;
  int8_ = int8_ || int8;
  qkv16_ = qkv16_ || qkv16;
  const std::int64_t rows = capacity_rows_, nb = capacity_batch_;
  if (need_f32) f32_rows_ = rows;
  if (need_qkv32) qkv32_rows_ = rows;
  if (need_hidden) hidden_rows_ = rows;
  if (!need_hidden || bf16_) shared_rows_ = rows;

  Embeddings::resize(c, *this, rows, training_, bf16_);
  if (need_hidden) grow(x0, rows * C);
  layers.resize(c.layers);
  // Growing in the shared form grows layers[0] only: the others are behind until a resize
  // that needs them all.
  all_layers_ = !share;
  const std::span<LayerActivations> used(layers.data(), share ? 1 : layers.size());
  if (!need_hidden || bf16_) grow(shared_hidden, rows * C);
  for (auto& l : used) {
    grow(blockwise ? l.lse : l.probs, capacity_attn_);
    grow(l.res1, rows * C);
    grow(l.mean1, rows);
    grow(l.rstd1, rows);
    grow(l.res2, rows * C);
    grow(l.mean2, rows);
    grow(l.rstd2, rows);
    if (need_qkv32) grow(l.qkv, rows * 3 * C);
    if (qkv16_) grow(l.qkv_bf16, rows * 3 * C);
    if (need_f32) {
      grow(l.att, rows * C);
      grow(l.h1, rows * C);
      grow(l.ff1, rows * F);
      // inference: act overwrites ff1 (see act()), unless gated (2I wide rows into I wide)
      if (training_ || gated) grow(l.act, rows * I);
    }
    if (pre_norm) grow(l.normed, rows * C);
    if (need_hidden) grow(l.out, rows * C);
  }
  grow(first_x, nb * C);
  if (pre_norm) {
    grow(final_out, rows * C);
    grow(final_mean, rows);
    grow(final_rstd, rows);
  }
  model_head(c).resize(c, *this, nb, rows, training_, bf16_);
  if (training_) {
    for (auto* b : {&d_out, &d_in, &d_ff2, &d_h1, &d_att}) {
      grow(*b, rows * C);
    }
    if (c.family->attention_output_dropout) grow(d_att_proj, rows * C);
    if (need_f32) {
      grow(d_act, rows * I);
      grow(d_ff1, rows * F);
    }
    grow(d_qkv, rows * 3 * C);
  }
  if (bf16_) {
    grow(shared_att, rows * C);
    for (auto& l : used) {
      if (blockwise && training_) grow(l.att_padded, rows * C);
      grow(l.x_bf16, rows * C);
      grow(l.att_bf16, rows * C);
      grow(l.h1_bf16, rows * C);
      if (training_ || gated) grow(l.act_bf16, rows * I);
      grow(l.ff1_bf16, rows * F);
    }
    if (training_) {
      grow(dy_bf16, rows * std::max(3 * C, F));
      grow(d_act_bf16, rows * I);
    }
  }
  if (int8_) {
    for (auto [slot, width] : {std::pair{&q8_hidden, C}, std::pair{&q8_inner, I}}) {
      grow(slot->q, rows * width);
      grow(slot->scale, rows);
      grow(slot->zero, rows);
    }
  }
}

bool blockwise_attention(const ModelConfig& config) { return config.rotary.enabled; }

QuantizedRows Activations::quantized(QuantizedSlot& slot) {
  return int8_now_ ? slot.rows() : QuantizedRows{};
}

float* Activations::embedded() { return keep_hidden_now_ ? x0.data() : shared_hidden.data(); }

float* Activations::layer_out(int l) {
  return keep_hidden_now_ ? layers[l].out.data() : shared_hidden.data();
}

float* Activations::encoder_out(const ModelConfig& config) {
  return config.structure.pre_norm ? final_out.data() : layer_out(config.layers - 1);
}
// The per-layer tensors below come from layer(l): layers[0] for every layer when shared.

Rows Activations::layer_in(int l) {
  return {l == 0 ? embedded() : layer_out(l - 1), bf16_now_ ? layer(l).x_bf16.data() : nullptr,
          l == 0 ? QuantizedRows{} : quantized(q8_hidden)};
}

// bf16 keeps qkv, ff1 and act in bf16 only, and att and h1 in buffers shared by all layers (see
// shared_hidden), with their bf16 roundings per layer.
Rows Activations::qkv(int l) {
  LayerActivations& s = layer(l);
  if (bf16_now_) return Rows{nullptr, s.qkv_bf16.data()};
  if (qkv16_now_) return Rows{qkv_in_ff1_now_ ? s.ff1.data() : s.qkv.data(), s.qkv_bf16.data()};
  return Rows{s.qkv.data()};
}
Rows Activations::att(int l) {
  return bf16_now_ ? Rows{shared_att.data(), layer(l).att_bf16.data()} : Rows{layer(l).att.data()};
}
Rows Activations::h1(int l) {
  if (bf16_now_) return Rows{shared_hidden.data(), layer(l).h1_bf16.data()};
  return Rows{layer(l).h1.data(), nullptr, quantized(q8_hidden)};
}
Rows Activations::ff1(int l) {
  return bf16_now_ ? Rows{nullptr, layer(l).ff1_bf16.data()} : Rows{layer(l).ff1.data()};
}
Rows Activations::act(int l) {
  // Only backward reads ff1 once act is made: an inference forward writes act over it.
  LayerActivations& s = layer(l);
  const bool own = training_now_ || gated_now_;
  if (bf16_now_) return Rows{nullptr, own ? s.act_bf16.data() : s.ff1_bf16.data()};
  return Rows{own ? s.act.data() : s.ff1.data(), nullptr, quantized(q8_inner)};
}
Rows Activations::d_act_rows() {
  return bf16_now_ ? Rows{nullptr, d_act_bf16.data()} : Rows{d_act.data()};
}
Rows Activations::emb_normed_rows() {
  return {emb_normed.data(), bf16_now_ ? emb_normed_bf16.data() : nullptr};
}

std::vector<std::int32_t> position_ids(const ModelConfig& config, const std::int32_t* input_ids,
                                       int B, int T) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(B) * T);
  for (int b = 0; b < B; ++b) {
    std::int32_t count = 0;
    for (int t = 0; t < T; ++t) {
      const std::int64_t p = std::int64_t{b} * T + t;
      if (config.family->position_ids == PositionIds::kIndex) {
        out[p] = t;
        continue;
      }
      // RoBERTa's create_position_ids_from_input_ids: cumsum(ids != pad) · (ids != pad) + pad.
      const std::int32_t pad = config.pad_token_id;
      const bool real = input_ids[p] != pad;
      count += real;
      out[p] = real ? count + pad : pad;
    }
  }
  return out;
}

void Activations::layout_tokens(const ModelConfig& config, const std::int32_t* input_ids,
                                const std::int32_t* token_type_ids,
                                const std::int32_t* attention_mask, bool unpadded) {
  const std::int64_t padded = std::int64_t{B} * T;
  token_rows.clear();
  if (unpadded && attention_mask != nullptr) {
    for (std::int64_t p = 0; p < padded; ++p)
      if (attention_mask[p] != 0) token_rows.push_back(p);
  }
  packed = unpadded && attention_mask != nullptr &&
           static_cast<std::int64_t>(token_rows.size()) < padded;
  if (!packed) {
    token_rows.resize(padded);
    for (std::int64_t p = 0; p < padded; ++p) token_rows[p] = p;
  }
  N = static_cast<std::int64_t>(token_rows.size());
  ids.resize(N);
  types.resize(N);
  positions.resize(N);
  cls_rows.assign(B, -1);
  row_sequence.resize(N);
  first_rows.resize(B);
  for (int b = 0; b < B; ++b) first_rows[b] = std::int64_t{b} * T;
  const std::vector<std::int32_t> padded_positions = position_ids(config, input_ids, B, T);
  for (std::int64_t r = 0; r < N; ++r) {
    const std::int64_t p = token_rows[r];
    ids[r] = input_ids[p];
    types[r] = token_type_ids != nullptr ? token_type_ids[p] : 0;
    positions[r] = padded_positions[p];
    const bool real = attention_mask == nullptr || attention_mask[p] != 0;
    row_sequence[r] = real ? static_cast<std::int32_t>(p / T) : -1;
    if (p % T == 0) cls_rows[p / T] = r;
  }
  for (int b = 0; b < B; ++b)
    CHECK(cls_rows[b] >= 0, "sequence ", b, " of the batch starts with padding (mask 0)");
  if (!packed) token_rows.clear();
}

}  // namespace bertfit
