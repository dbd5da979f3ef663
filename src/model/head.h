// Heads: what turns the last encoder layer's hidden states into the model's outputs (logits),
// behind one interface, so that a task's head is a declaration plus its own pieces. A head
// declares its tensors and products into the layout, sizes its buffers (Activations::head and
// the logits), runs forward and backward on Activations, takes its loss (the shape of its labels
// is its own) and says how its outputs are laid out. Nothing else branches on which head a model
// has (model/head_kind.h) but the code that chooses it or routes a command's data and output by
// it (model/family_test.cc greps for the others).
//
// The sequence classifier (every family's *ForSequenceClassification), on each sequence's first
// token h = out[:,0] of the last layer (or the mean of its real tokens, ModernBERT's
// classifier_pooling "mean"):
//   logits = Wo · Drop(norm?(act(Wd · Drop?(h) + bd))) + bo
// (norm: ModernBERT's head.norm; bd absent without classifier_bias)
// with the family's module names, activation (BERT's pooler and RoBERTa's tanh, DistilBERT's
// ReLU, ELECTRA's GELU) and the dropout on h in the heads that have it (model/family.h,
// ClassifierHeadSpec).
//
// The token classifier (*ForTokenClassification), on every token of the last layer:
//   logits[t] = Wo · Drop(h[t]) + bo
// or, in ModernBERT, Wo · Drop(norm(act(Wd · h[t] + bd))) + bo (TokenHeadSpec::dense_and_norm)
// laid out padded, (B·T,K); the family declares the module name and which dropout applies.
//
// The embedding head (sentence-transformers' Pooling and Normalize modules, pooling_head.cc), on
// every real token of the last layer: the config's pooling modes concatenated, (B, modes·C),
// each row L2-normalized when the model normalizes. No tensors of its own. Its
// labels are one per token, kIgnoredLabel where none applies; the loss is that of the labelled
// rows.
#pragma once

#include <cstdint>
#include <string>

#include "model/activations.h"
#include "model/config.h"
#include "model/loss.h"
#include "model/param_layout.h"
#include "model/pass.h"
#include "model/weights.h"

namespace bertfit {

class Head {
 public:
  virtual ~Head() = default;

  // Its tensors and products (layer L of the layout), one gradient group.
  virtual void declare(const ModelConfig& c, LayoutBuilder& b) const = 0;
  // Whether it reads only each sequence's first token of the last layer (which then runs on
  // those rows alone unless ModelInput::full_last_layer).
  virtual bool first_tokens_only(const ModelConfig& c) const = 0;
  // Whether its outputs are one row per token (laid out padded, (B·T,K)) rather than one row
  // per sequence ((B,K)).
  virtual bool outputs_per_token() const = 0;
  // The name of the weight whose rows are the head's outputs (num_labels of them), by which a
  // checkpoint's head size is read: "classifier.weight".
  virtual std::string output_weight(const ModelConfig& c) const = 0;
  // The width of one output row: num_labels for a classifier, the pooled vector's size for an
  // embedding head.
  virtual int output_width(const ModelConfig& c) const { return c.num_labels; }
  // How many label values loss() reads for a padded batch of B sequences of T tokens.
  virtual std::int64_t label_count(const ModelConfig& c, int B, int T) const = 0;
  // Sizes a.head and the logits (and their gradient) for `batch` sequences of `rows` token rows
  // in all, as Activations::resize does (never shrinks).
  virtual void resize(const ModelConfig& c, Activations& a, std::int64_t batch, std::int64_t rows,
                      bool training, bool bf16) const = 0;
  // From the last layer's output (a.layer_out(L-1)) to a.logits.
  virtual void forward(const ModelWeights& w, const DropoutState& d, Activations& a) const = 0;
  // From a.dlogits to a.d_out (the gradient w.r.t. the last layer's output rows), the head's
  // gradients += into grads. One group done.
  virtual void backward(const ModelWeights& w, const DropoutState& d, float* grads, Activations& a,
                        GradsReady& ready) const = 0;
  // The loss of a.logits against labels (label_count() values), with a.probs and
  // a.dlogits = scale · d loss / d logits (rows without a label 0), as transformers takes it;
  // the classifiers': rows_loss (model/loss.h) on the rows that have labels.
  virtual double loss(const ModelConfig& c, const LossOptions& options, const float* labels,
                      float scale, Activations& a) const = 0;
};

// The head a config's model has (a stateless object that lives for the whole program).
const Head& model_head(const ModelConfig& c);

// The embedding head (model/pooling_head.cc).
const Head& pooling_head();

}  // namespace bertfit
