// The model: its components in order, the embeddings (model/embeddings.h), the encoder layers
// (model/layer.h) and the head (model/head.h), forward and the mirrored backward, over the flat
// parameter buffer described by ParamLayout (read through ModelWeights). Training and inference
// share the forward.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/activations.h"
#include "model/config.h"
#include "model/loss.h"
#include "model/param_layout.h"
#include "model/pass.h"
#include "model/precision.h"
#include "model/weights.h"

namespace bertfit {

// One padded batch: B sequences of T tokens, row-major (B,T).
struct ModelInput {
  int B = 0, T = 0;
  const std::int32_t* input_ids = nullptr;
  const std::int32_t* token_type_ids = nullptr;  // nullptr: all zeros (ignored by DistilBERT)
  const std::int32_t* attention_mask = nullptr;  // 1 real token, 0 padding
  // Run the token-wise layers (embeddings, products, LayerNorm, activation) on the real tokens
  // only (see activations.h). The logits, the loss and every gradient are those of the padded
  // computation (padding rows influence nothing: attention masks them as keys, and only [CLS]
  // rows reach the head); the hidden states then hold only the real tokens' rows. Dropout
  // masks are keyed by row, so with dropout on the two modes draw different masks.
  bool unpadded = true;
  // The head reads only each sequence's first token ([CLS]) of the last layer, so by default
  // that layer's attention computes query row 0 alone and everything after it runs on those B
  // rows: the logits, loss and gradients are unchanged, and about 5/6 of the last layer's work is
  // skipped. true computes the last layer for every token (its hidden states are then complete).
  bool full_last_layer = false;
  // Keep what backward needs (its scratch, and in bf16 the backward copies of the weights) even
  // with dropout off, e.g. for the gradients of an eval-mode forward. A training forward
  // (DropoutState::train) always keeps it.
  bool for_backward = false;
};

class BertModel {
 public:
  BertModel(const ModelConfig& config, const ParamLayout& layout,
            Precision precision = Precision::kF32)
      : config_(config), layout_(layout), precision_(precision) {}

  // Weights for this model's precision, to prepare() from the parameters (model/weights.h).
  ModelWeights make_weights() const { return ModelWeights(config_, layout_, precision_); }

  // Fills acts (including acts.logits (B,K)) from the weights, which must be prepared (with
  // backward's copies when this forward keeps backward state).
  void forward(const ModelWeights& weights, const ModelInput& in, const DropoutState& dropout,
               Activations& acts) const;

  // Loss of acts.logits against labels, and acts.dlogits = scale · d loss / d logits, as HF: the
  // head's (Head::loss, model/head.h), with the loss options. A sequence head's labels are (B)
  // class ids as floats or regression targets, or (B,K) multi-hot rows (multi-label); a token
  // head's are (B·T) padded, one class id per token, kIgnoredLabel (-100) where no label applies
  // (at least one must). The loss by problem type: rows_loss (model/loss.h).
  double loss(const float* labels, float scale, Activations& acts) const;
  // Set before training (checked: single-label only, one weight per label).
  void set_loss_options(LossOptions options);
  const LossOptions& loss_options() const { return loss_options_; }

  // grads += d loss / d params, from acts.dlogits and what forward saved; the forward must have
  // run on the same batch with dropout training or ModelInput::for_backward (checked: a
  // violation aborts with a message, never reaches the products). `on_grads_ready(o)`,
  // if set, is called whenever every gradient at flat offsets >= o is final, with decreasing
  // o: after each gradient group the components declared (the head, each module of each layer,
  // the embeddings: o = 0), so communication can start early.
  void backward(const ModelWeights& weights, float* grads, const ModelInput& in,
                const DropoutState& dropout, Activations& acts,
                const std::function<void(std::int64_t)>& on_grads_ready = {}) const;

  // The offsets backward passes to on_grads_ready, in the order it passes them: where a
  // gradient reducer may cut its buckets (the layout's; model/bert_test.cc checks each is true).
  const std::vector<std::int64_t>& grad_ready_offsets() const {
    return layout_.grad_ready_offsets();
  }

  const ModelConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  Precision precision() const { return precision_; }

 private:
  const ModelConfig& config_;
  const ParamLayout& layout_;
  Precision precision_;
  LossOptions loss_options_;
};

}  // namespace bertfit
