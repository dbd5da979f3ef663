// The norm after the last encoder layer of pre-norm families (LayerStructure::pre_norm,
// ModernBERT's final_norm): out = LN(last layer's output), on the rows the last layer computed
// (the first tokens only when the head reads no more). Its tensors are declared with the last
// layer, a gradient group of their own after it; the head reads Activations::encoder_out.
#pragma once

#include "model/activations.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/pass.h"
#include "model/weights.h"

namespace bertfit {

class FinalNorm {
 public:
  static bool used(const ModelConfig& c) { return c.structure.pre_norm; }
  static void declare(const ModelConfig& c, LayoutBuilder& b);

  explicit FinalNorm(const ModelWeights& w) : w_(w) {}
  // a.layer_out(L-1) -> a.encoder_out.
  void forward(Activations& a) const;
  // a.d_out (w.r.t. encoder_out) -> a.d_in (w.r.t. the last layer's output); its gradients
  // += into grads; one group done.
  void backward(float* grads, Activations& a, GradsReady& ready) const;

 private:
  const ModelWeights& w_;
};

}  // namespace bertfit
