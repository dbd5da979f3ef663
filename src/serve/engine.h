// The model side of `bertfit serve`: a sequence classifier whose weights are prepared once, at
// construction (ModelWeights), and whose activations are reused by every batch, so that after
// warm_up() a batch allocates nothing. One thread at a time (the batcher's compute worker).
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
  int num_labels() const { return state_.config.num_labels; }

  // logits (n,K) of the n sequences, each [CLS] ... [SEP] of at most max_positions tokens. They
  // are run sorted by length, in forward passes of at most max_padded_tokens padded tokens, each
  // unpadded (the token-wise layers see the real tokens only). Eval mode, no dropout.
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
  // Reused per forward: the order of a batch and its padded (B,T) inputs.
  std::vector<std::size_t> order_;
  std::vector<std::int32_t> ids_, types_, mask_;
};

}  // namespace bertfit::serve
