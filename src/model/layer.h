// One DistilBERT / BERT encoder layer, forward and backward (Hugging Face semantics):
//   a  = Attn(x)                       scaled dot-product attention, dropout on probabilities
//   r1 = x + Drop(a·Woᵀ + bo)          BERT drops here (BertSelfOutput); DistilBERT does not
//   h1 = LN1(r1)
//   f  = act(h1·W1ᵀ + b1)
//   r2 = h1 + Drop(f·W2ᵀ + b2)
//   out = LN2(r2)
// The backward is the forward read bottom-up.
//
// Pre-norm layers (LayerStructure::pre_norm, ModernBERT), with a gated FFN:
//   n1  = LN1(x)                       none in a layer without attention norm: n1 = x
//   a   = Attn(rot(n1·Wqkvᵀ (+b)))     rotary q, k; a sliding window in local layers
//   h   = x + Drop(a·Woᵀ (+bo))
//   g   = LN2(h)·W1ᵀ (+b1)             (N, 2I)
//   out = h + Drop(act(g[:, :I]) · g[:, I:])·W2ᵀ (+b2)
// with a bias only where the config has one (attention_bias, mlp_bias, norm_bias). The products are
// Linear ops bound to the layer's weights in their precision (model/linear.h), and the tensors come
// from Activations in the form that precision keeps: nothing here branches on the precision.
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/activation.h"
#include "kernels/attention.h"
#include "model/activations.h"
#include "model/linear.h"
#include "model/param_layout.h"
#include "model/pass.h"
#include "model/weights.h"

namespace bertfit {

// The kernels' activation for a config's hidden_act / activation.
ActKind activation_kind(Activation a);

class EncoderLayer {
 public:
  // Layer l's tensors with the family's names, in forward order: q, k, v (weights, then biases:
  // adjacent, one (3C,C) product), o, LayerNorm 1, ff1, ff2, LayerNorm 2; its four products
  // (int8 runs them quantized); a gradient group per module (q|k|v one).
  static void declare(const ModelConfig& c, int l, LayoutBuilder& b);

  EncoderLayer(const ModelWeights& weights, int layer);

  // a.layer_in(l) -> a.layer_out(l), saving what backward reads. When a.cls_only and this is
  // the last layer, only the first token of each sequence reaches the head: attention computes
  // query row 0 alone and the rest of the layer runs on those B rows (out holds B rows).
  void forward(const LayerRun& run, Activations& a) const;

  // From a.d_out (gradient w.r.t. the layer's output, rows as forward wrote them) to a.d_in
  // (w.r.t. its input, N rows); the layer's parameter gradients += into grads (ParamLayout's
  // flat buffer). ready.done() after each gradient group (ln2, ff2, ff1, ln1, o, qkv).
  void backward(const LayerRun& run, float* grads, Activations& a, GradsReady& ready) const;

 private:
  bool first_tokens_only(const Activations& a) const;
  static void declare_pre_norm(const ModelConfig& c, int l, LayoutBuilder& b);
  void forward_pre_norm(const LayerRun& run, Activations& a) const;
  void backward_pre_norm(const LayerRun& run, float* grads, Activations& a,
                         GradsReady& ready) const;
  bool has_attention_norm() const;

  const ModelWeights& w_;
  int l_;
  Linear qkv_, o_, ff1_, ff2_;
};

}  // namespace bertfit
