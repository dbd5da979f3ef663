// The serving engine (see engine.h).
#include "serve/engine.h"

#include <algorithm>
#include <numeric>

#include "base/aligned.h"
#include "base/check.h"
#include "model/head.h"

namespace bertfit::serve {

Engine::Engine(ModelState& state, Precision precision, std::int64_t max_padded_tokens)
    : state_(state),
      model_(state.config, state.layout, precision),
      weights_(model_.make_weights()),
      max_padded_tokens_(max_padded_tokens),
      per_token_(model_head(state.config).outputs_per_token()),
      token_rows_(!model_head(state.config).first_tokens_only(state.config) && !per_token_),
      output_width_(model_head(state.config).output_width(state.config)) {
  weights_.prepare(state.params.data(), /*with_backward=*/false);
  for (const auto& [offset, count] : weights_.unread_ranges()) {
    discard_pages(state.params.data() + offset, sizeof(float) * count);
  }
}

void Engine::run(std::span<const Encoding* const> sequences, float* out,
                 std::span<const Output> what) {
  CHECK(what.empty() || what.size() == sequences.size(), what.size(), " outputs for ",
        sequences.size(), " sequences");
  out_start_.resize(sequences.size());
  std::size_t values = 0;
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    const Output w = what.empty() ? Output::kHead : what[i];
    CHECK(w == Output::kHead || token_rows_, "token rows from a head that does not pool them");
    out_start_[i] = values;
    values += output_rows(*sequences[i], w) * static_cast<std::size_t>(output_width(w));
  }
  order_.resize(sequences.size());
  std::iota(order_.begin(), order_.end(), std::size_t{0});
  std::stable_sort(order_.begin(), order_.end(), [&](std::size_t x, std::size_t y) {
    return sequences[x]->input_ids.size() < sequences[y]->input_ids.size();
  });
  // Sorted by length, a run of B sequences pads to its last one's length T: cut where B·T would
  // pass the bound (a sequence alone always fits: max_tokens() <= max_padded_tokens).
  std::size_t first = 0;
  while (first < order_.size()) {
    std::size_t end = first + 1;
    while (end < order_.size() &&
           static_cast<std::int64_t>(end + 1 - first) *
                   static_cast<std::int64_t>(sequences[order_[end]]->input_ids.size()) <=
               max_padded_tokens_) {
      ++end;
    }
    forward(sequences, std::span(order_).subspan(first, end - first), what, out);
    first = end;
  }
}

void Engine::forward(std::span<const Encoding* const> sequences, std::span<const std::size_t> rows,
                     std::span<const Output> what, float* out) {
  const int B = static_cast<int>(rows.size());
  int T = 0;
  for (std::size_t r : rows) T = std::max(T, static_cast<int>(sequences[r]->input_ids.size()));
  CHECK(T <= state_.config.max_tokens(), "sequence of ", T, " tokens");
  const std::size_t n = static_cast<std::size_t>(B) * T;
  ids_.assign(n, 0);
  types_.assign(n, 0);
  mask_.assign(n, 0);
  for (int b = 0; b < B; ++b) {
    const Encoding& e = *sequences[rows[b]];
    std::copy(e.input_ids.begin(), e.input_ids.end(), ids_.begin() + std::size_t(b) * T);
    std::copy(e.token_type_ids.begin(), e.token_type_ids.end(),
              types_.begin() + std::size_t(b) * T);
    std::fill_n(mask_.begin() + std::size_t(b) * T, e.input_ids.size(), 1);
  }
  ModelInput in{B, T, ids_.data(), types_.data(), mask_.data()};
  model_.forward(weights_, in, DropoutState{}, acts_);
  // The head's rows: one per sequence, or (B·T) padded, one per token.
  const std::size_t K = static_cast<std::size_t>(output_width());
  bool tokens = false;
  for (int b = 0; b < B; ++b) {
    const std::size_t i = rows[b];
    if (!what.empty() && what[i] == Output::kTokens) {
      tokens = true;
      continue;
    }
    const std::size_t n = output_rows(*sequences[i]);
    const std::size_t from = per_token_ ? static_cast<std::size_t>(b) * T : std::size_t(b);
    std::copy_n(acts_.logits.data() + from * K, n * K, out + out_start_[i]);
  }
  if (!tokens) return;
  // Token rows: the last layer's real rows (packed or padded; row_sequence marks each row's
  // sequence, -1 for padding), in token order within each sequence.
  const std::size_t C = static_cast<std::size_t>(state_.config.hidden);
  const float* hidden = acts_.encoder_out(state_.config);
  copied_.assign(static_cast<std::size_t>(B), 0);
  for (std::int64_t r = 0; r < acts_.N; ++r) {
    const std::int32_t b = acts_.row_sequence[r];
    if (b < 0 || what[rows[b]] != Output::kTokens) continue;
    std::copy_n(hidden + r * C, C, out + out_start_[rows[b]] + copied_[b]++ * C);
  }
  for (int b = 0; b < B; ++b) {
    CHECK(what[rows[b]] != Output::kTokens || copied_[b] == sequences[rows[b]]->input_ids.size(),
          "sequence ", b, ": ", copied_[b], " token rows");
  }
}

void Engine::warm_up(std::int32_t cls_id, std::int32_t sep_id) {
  // The longest sequences the bound allows, then as many of the shortest: the two extremes of
  // rows (B·T) and of batch size B that a forward can reach.
  const int max_len = state_.config.max_tokens();
  std::vector<Encoding> seqs;
  for (int len : {max_len, 2}) {
    const std::int64_t count = std::max<std::int64_t>(1, max_padded_tokens_ / len);
    seqs.assign(count, Encoding{});
    for (Encoding& e : seqs) {
      e.input_ids.assign(len, cls_id);
      e.input_ids.back() = sep_id;
      e.token_type_ids.assign(len, 0);
      e.attention_mask.assign(len, 1);
    }
    std::vector<const Encoding*> ptrs;
    for (const Encoding& e : seqs) ptrs.push_back(&e);
    std::vector<float> out(seqs.size() * output_rows(seqs[0]) * output_width());
    run(ptrs, out.data());
  }
  copied_.reserve(max_padded_tokens_);
  ids_.reserve(max_padded_tokens_);
  types_.reserve(max_padded_tokens_);
  mask_.reserve(max_padded_tokens_);
}

}  // namespace bertfit::serve
