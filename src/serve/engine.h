// The model side of `bertfit serve`: a classifier (of sequences or of tokens) whose weights are
// prepared once, at construction (ModelWeights), and whose activations are reused by every
// batch, so that after warm_up() a batch allocates nothing. One thread at a time (the batcher's
// compute worker).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/activations.h"
#include "model/bert.h"
#include "model/model_io.h"
#include "tokenizer/tokenizer.h"

namespace bertfit::serve {

class Engine {
 public:
  // state must outlive the engine, which owns its parameters from then on: the fp32 weights of
  // the prepared products are discarded (ModelWeights::unread_ranges), so the server holds each
  // weight once, in the form its products read. max_padded_tokens bounds B·T of one forward pass
  // (attention runs on the padded (B,T) layout and keeps (B,H,T,T) probabilities).
  Engine(ModelState& state, Precision precision, std::int64_t max_padded_tokens);

  const ModelConfig& config() const { return state_.config; }
  // K: the width of an output row (labels, or an embedding's size).
  int output_width() const { return output_width_; }
  // The rows of K outputs the model gives for one input: one for a sequence or embedding head,
  // one per token for a token head.
  std::size_t output_rows(const Encoding& input) const {
    return per_token_ ? input.input_ids.size() : 1;
  }

  // The logits of the n sequences, each [CLS] ... [SEP] of at most max_positions tokens: for
  // each sequence in order, its output_rows() rows of K. They are run sorted by length, in
  // forward passes of at most max_padded_tokens padded tokens, each unpadded (the token-wise
  // layers see the real tokens only). Eval mode, no dropout.
  void run(std::span<const Encoding* const> sequences, float* logits);

  // Sizes the activations for the largest forward run() can make (max_padded_tokens tokens at
  // the longest length, and as many shortest sequences), so that later batches allocate nothing.
  void warm_up(std::int32_t cls_id, std::int32_t sep_id);

 private:
  void forward(std::span<const Encoding* const> sequences, std::span<const std::size_t> rows,
               float* logits);

  const ModelState& state_;
  BertModel model_;
  ModelWeights weights_;
  Activations acts_;
  std::int64_t max_padded_tokens_;
  bool per_token_;
  int output_width_;
  // Reused per forward: the order of a batch, where each sequence's rows start in the output,
  // and its padded (B,T) inputs.
  std::vector<std::size_t> order_, row_start_;
  std::vector<std::int32_t> ids_, types_, mask_;
};

}  // namespace bertfit::serve
