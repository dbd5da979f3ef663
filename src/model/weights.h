// ModelWeights: the parameters as the forward and backward read them. The flat fp32 buffer
// (ParamLayout) and, when the products run in bf16, every product's weight prepared for gemm/
// (in int8, the encoder layers' products' weights quantized and prepared; see precision.h)
// from it: rounded and laid out once instead of in every product, which costs more than a whole
// forward of one short sequence (docs/DESIGN.md, "Measurements", training step). The prepared forms
// are derived state: prepare() after every change of the parameters (TrainStep does it once per
// optimizer step, evaluation once per call), and the forwards in between share them.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "base/aligned.h"
#include "gemm/gemm.h"
#include "model/config.h"
#include "model/linear.h"
#include "model/param_layout.h"
#include "model/precision.h"

namespace bertfit {

class ModelWeights {
 public:
  ModelWeights(const ModelConfig& config, const ParamLayout& layout, Precision precision);

  // Binds to params (ParamLayout's flat buffer, which must outlive the binding) and prepares the
  // products' weights from their current values; with_backward also the copies backward reads.
  void prepare(const float* params, bool with_backward);

  bool prepared() const { return params_ != nullptr; }
  bool with_backward() const { return with_backward_; }
  Precision precision() const { return precision_; }
  const ModelConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  const float* params() const { return params_; }
  // The tensor of role r (of layer l for encoder roles).
  const float* operator()(Role r, int l = 0) const { return params_ + layout_.offset(r, l); }
  // The same, or nullptr when the layout has no such tensor (a bias the config leaves out).
  const float* maybe(Role r, int l = 0) const {
    return layout_.has(r, l) ? (*this)(r, l) : nullptr;
  }

  // The parameter ranges (offset, count) that forwards with these weights never read: the
  // weights of the prepared products, when prepared without backward (then only the prepared
  // copies are read). A process that only infers can discard their memory
  // (base/aligned.h's discard_pages); prepare() must not be called again on them.
  std::vector<std::pair<std::int64_t, std::int64_t>> unread_ranges() const;

  // The product whose weight has role r (of layer l; the layout's products(), e.g. kQW for q, k
  // and v fused, (3C,C)), bound to its weight, bias and prepared form.
  Linear linear(Role r, int l = 0) const;

  // DeBERTa's relative-position projections of layer l ([pq | pk], (P, 2C), as
  // RelativePositions::project makes them without dropout), made by prepare() without backward:
  // derived state like the prepared products, so that inference does not project the P
  // relative embeddings in every forward (they depend on the weights alone). Null otherwise.
  const float* relative_projection(int l) const;

 private:
  // Whether product p has a prepared form in this precision (int8: the quantized ones; fp32:
  // all, without backward; bf16: all).
  bool prepares(const ProductEntry& p) const;

  const ModelConfig& config_;
  const ParamLayout& layout_;
  Precision precision_;
  const float* params_ = nullptr;
  bool with_backward_ = false;
  // One slot per product of the layout (products() order), filled where prepares().
  std::vector<PreparedWeightBf16> bf16_;  // bf16
  std::vector<PreparedWeightInt8> int8_;  // int8
  std::vector<PreparedWeightF32> f32_;    // fp32 without backward
  AlignedBuffer<float> rel_proj_;         // layers × (P, 2C); empty unless computed
};

}  // namespace bertfit
