// The embeddings component (Hugging Face semantics):
//   e  = word[ids] + pos[p] (+ type[tt], families with token types)      (N,E)
//   x0 = Drop(LN(e))                                                      (N,E)
//   x0 = x0·Wpᵀ + bp, in families whose embedding size E differs from the hidden size C
//        (ELECTRA's embeddings_project), else E = C
// It declares its tensors and its product (the projection) into the layout, sizes its buffers
// (Activations::emb*), and runs forward and backward on Activations (emb*, and the layers' input
// a.embedded()).
#pragma once

#include <cstdint>

#include "model/activations.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/pass.h"
#include "model/weights.h"

namespace bertfit {

class Embeddings {
 public:
  // Its tensors: word, position (and token-type) embeddings, the LayerNorm and the projection;
  // one gradient group.
  static void declare(const ModelConfig& c, LayoutBuilder& b);
  // Whether the config's embeddings are projected to the hidden size.
  static bool projects(const ModelConfig& c);
  // Sizes a.emb* for `rows` token rows, as Activations::resize does (never shrinks): with the
  // projection's input and gradients when there is one.
  static void resize(const ModelConfig& c, Activations& a, std::int64_t rows, bool training,
                     bool bf16);

  explicit Embeddings(const ModelWeights& weights) : w_(weights) {}

  // a.ids/positions/types -> a.embedded().
  void forward(const LayerRun& run, Activations& a) const;
  // From a.d_out (the gradient w.r.t. a.embedded()) to the embeddings' gradients (+= into
  // grads); uses a.d_in as scratch. One group done.
  void backward(const LayerRun& run, float* grads, Activations& a, GradsReady& ready) const;

 private:
  const ModelWeights& w_;
};

}  // namespace bertfit
