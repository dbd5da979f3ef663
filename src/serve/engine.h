// The model side of `bertfit serve`: a model (a classifier of sequences or of tokens, or an
// embedder) whose weights are prepared once, at construction (ModelWeights), and whose
// activations are reused by every batch, so that after warm_up() a batch allocates nothing. Per
// sequence it gives the head's outputs or, for a pooling head, the last layer's row of every
// token (TEI's /embed_all). One thread at a time (the batcher's compute worker).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/activations.h"
#include "model/bert.h"
#include "model/model_io.h"
#include "tokenizer/tokenizer.h"

namespace bertfit::serve {

// What run() gives for one sequence: the head's outputs, or the last layer's hidden state at
// each of its tokens ([CLS] and [SEP] included; no pooling, no normalization).
enum class Output { kHead, kTokens };

class Engine {
 public:
  // state must outlive the engine, which owns its parameters from then on: the fp32 weights of
  // the prepared products are discarded (ModelWeights::unread_ranges), so the server holds each
  // weight once, in the form its products read. max_padded_tokens bounds B·T of one forward pass
  // (attention runs on the padded (B,T) layout and keeps (B,H,T,T) probabilities).
  Engine(ModelState& state, Precision precision, std::int64_t max_padded_tokens);

  const ModelConfig& config() const { return state_.config; }
  // The width of an output row: K (labels, or an embedding's size) for the head's outputs, the
  // hidden size C for token rows.
  int output_width(Output what = Output::kHead) const {
    return what == Output::kHead ? output_width_ : state_.config.hidden;
  }
  // The rows the model gives for one input: for the head, one for a sequence or embedding head
  // and one per token for a token head; one per token for token rows.
  std::size_t output_rows(const Encoding& input, Output what = Output::kHead) const {
    return per_token_ || what == Output::kTokens ? input.input_ids.size() : 1;
  }
  // Whether run() can give Output::kTokens: the head pools every token of the last layer (it
  // neither reads the first tokens only, so the last layer is complete, nor answers per token).
  bool serves_token_rows() const { return token_rows_; }

  // The outputs of the n sequences, each [CLS] ... [SEP] of at most max_positions tokens: for
  // each sequence in order, its output_rows() rows of output_width(), of what[i] (all kHead when
  // what is empty; kTokens needs serves_token_rows()). They are run sorted by length, in forward
  // passes of at most max_padded_tokens padded tokens, each unpadded (the token-wise layers see
  // the real tokens only). Eval mode, no dropout.
  void run(std::span<const Encoding* const> sequences, float* out,
           std::span<const Output> what = {});

  // Sizes the activations for the largest forward run() can make (max_padded_tokens tokens at
  // the longest length, and as many shortest sequences), so that later batches allocate nothing.
  void warm_up(std::int32_t cls_id, std::int32_t sep_id);

 private:
  void forward(std::span<const Encoding* const> sequences, std::span<const std::size_t> rows,
               std::span<const Output> what, float* out);

  const ModelState& state_;
  BertModel model_;
  ModelWeights weights_;
  Activations acts_;
  std::int64_t max_padded_tokens_;
  bool per_token_;
  bool token_rows_;
  int output_width_;
  // Reused per forward: the order of a batch, where each sequence's values start in the output,
  // each sequence's token rows copied so far, and its padded (B,T) inputs.
  std::vector<std::size_t> order_, out_start_, copied_;
  std::vector<std::int32_t> ids_, types_, mask_;
};

}  // namespace bertfit::serve
