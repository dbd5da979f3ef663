// Binding the parameters and preparing the products' weights (see weights.h). The products are
// the layout's (ParamLayout::products), as the components declared them.
#include "model/weights.h"

#include "base/check.h"
#include "model/relative_positions.h"

namespace bertfit {

ModelWeights::ModelWeights(const ModelConfig& config, const ParamLayout& layout,
                           Precision precision)
    : config_(config), layout_(layout), precision_(precision) {}

bool ModelWeights::prepares(const ProductEntry& p) const {
  switch (precision_) {
    case Precision::kInt8:
      return p.quantized;
    case Precision::kF32:
      return !with_backward_;  // training's products read the weights the optimizer updates
    case Precision::kBF16:
      return true;
  }
  return false;
}

void ModelWeights::prepare(const float* params, bool with_backward) {
  CHECK(params != nullptr, "ModelWeights::prepare without parameters");
  CHECK(precision_ != Precision::kInt8 || !with_backward, "int8 weights are for inference only");
  params_ = params;
  with_backward_ = with_backward;
  const std::vector<ProductEntry>& products = layout_.products();
  // The slots keep their buffers from one prepare() to the next (a training step prepares every
  // step): each product is prepared again in place.
  switch (precision_) {
    case Precision::kInt8:
      int8_.resize(products.size());
      break;
    case Precision::kF32:
      if (with_backward) f32_.clear();  // training's products read the plain weights
      if (!with_backward) f32_.resize(products.size());
      break;
    case Precision::kBF16:
      bf16_.resize(products.size());
      break;
  }
  for (std::size_t i = 0; i < products.size(); ++i) {
    const ProductEntry& p = products[i];
    if (!prepares(p)) continue;
    const float* w = (*this)(p.weight, p.layer);
    if (precision_ == Precision::kInt8) {
      int8_[i].prepare(w, p.N, p.K);
    } else if (precision_ == Precision::kF32) {
      f32_[i].prepare(w, p.N, p.K);
    } else {
      bf16_[i].prepare(w, p.N, p.K, with_backward);
    }
  }
  // After the products: the projections read the query and key weights in fp32, which a
  // serving process may discard once prepared (unread_ranges).
  if (!with_backward && RelativePositions::used(config_)) {
    RelativePositions(*this).project_all(rel_proj_);
  } else {
    rel_proj_ = AlignedBuffer<float>();
  }
}

const float* ModelWeights::relative_projection(int l) const {
  if (rel_proj_.size() == 0) return nullptr;
  const std::int64_t per_layer = RelativePositions::rows(config_) * 2 * config_.hidden;
  return rel_proj_.data() + l * per_layer;
}

std::vector<std::pair<std::int64_t, std::int64_t>> ModelWeights::unread_ranges() const {
  CHECK(prepared(), "unread_ranges before ModelWeights::prepare");
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  if (with_backward_) return out;
  for (const ProductEntry& p : layout_.products()) {
    if (prepares(p)) out.emplace_back(layout_.offset(p.weight, p.layer), p.N * p.K);
  }
  return out;
}

Linear ModelWeights::linear(Role r, int l) const {
  CHECK(prepared(), "the model's weights were used before ModelWeights::prepare");
  const std::size_t i = layout_.product_index(r, l);
  const ProductEntry& p = layout_.products()[i];
  const float* w = (*this)(p.weight, p.layer);
  const float* b = p.bias == kNoBias ? nullptr : (*this)(p.bias, p.layer);
  if (!prepares(p)) return Linear(w, b, static_cast<const PreparedWeightBf16*>(nullptr), p.N, p.K);
  switch (precision_) {
    case Precision::kInt8:
      return Linear(w, b, &int8_[i], p.N, p.K);
    case Precision::kF32:
      return Linear(w, b, &f32_[i], p.N, p.K);
    case Precision::kBF16:
      break;
  }
  return Linear(w, b, &bf16_[i], p.N, p.K);
}

}  // namespace bertfit
