// Binding the parameters and preparing the products' weights (see weights.h).
#include "model/weights.h"

#include "base/check.h"

namespace bertfit {
namespace {

// The products of one encoder layer, in slot order, and of the head.
constexpr Role kLayerProducts[] = {Role::kQW, Role::kOW, Role::kFf1W, Role::kFf2W};
constexpr int kProductsPerLayer = 4;

// The bias of the product whose weight has role r (the layout puts it right after the weight,
// q|k|v's after v).
Role bias_of(Role r) {
  switch (r) {
    case Role::kQW:
      return Role::kQB;
    case Role::kOW:
      return Role::kOB;
    case Role::kFf1W:
      return Role::kFf1B;
    case Role::kFf2W:
      return Role::kFf2B;
    case Role::kPreW:
      return Role::kPreB;
    case Role::kClsW:
      return Role::kClsB;
    default:
      break;
  }
  CHECK(false, "role ", static_cast<int>(r), " is not a product's weight");
  return r;
}

}  // namespace

ModelWeights::ModelWeights(const ModelConfig& config, const ParamLayout& layout,
                           Precision precision)
    : config_(config), layout_(layout), precision_(precision) {}

std::size_t ModelWeights::slot(Role r, int l) const {
  const std::size_t head = static_cast<std::size_t>(config_.layers) * kProductsPerLayer;
  if (r == Role::kPreW) return head;
  if (r == Role::kClsW) return head + 1;
  for (int i = 0; i < kProductsPerLayer; ++i)
    if (kLayerProducts[i] == r) return static_cast<std::size_t>(l) * kProductsPerLayer + i;
  CHECK(false, "role ", static_cast<int>(r), " is not a product's weight");
  return 0;
}

// (out, in) features of the product whose weight has role r.
std::pair<std::int64_t, std::int64_t> ModelWeights::shape(Role r) const {
  const std::int64_t C = config_.hidden, I = config_.intermediate;
  switch (r) {
    case Role::kQW:
      return {3 * C, C};  // q, k and v are adjacent in the layout: one (3C,C) product
    case Role::kFf1W:
      return {I, C};
    case Role::kFf2W:
      return {C, I};
    case Role::kClsW:
      return {config_.num_labels, C};
    default:
      return {C, C};  // kOW, kPreW
  }
}

void ModelWeights::prepare(const float* params, bool with_backward) {
  CHECK(params != nullptr, "ModelWeights::prepare without parameters");
  params_ = params;
  with_backward_ = with_backward;
  if (precision_ == Precision::kInt8) {
    CHECK(!with_backward, "int8 weights are for inference only");
    int8_.resize(static_cast<std::size_t>(config_.layers) * kProductsPerLayer);
    for (int l = 0; l < config_.layers; ++l)
      for (Role r : kLayerProducts) {
        const auto [N, K] = shape(r);
        int8_[slot(r, l)].prepare((*this)(r, l), N, K);
      }
    return;
  }
  if (precision_ == Precision::kF32) {
    // Inference only: training's products read the plain weights the optimizer updates.
    f32_.clear();
    if (with_backward) return;
    f32_.resize(slot(Role::kClsW, 0) + 1);
    auto prepare_f32 = [&](Role r, int l) {
      const auto [N, K] = shape(r);
      f32_[slot(r, l)].prepare((*this)(r, l), N, K);
    };
    for (int l = 0; l < config_.layers; ++l)
      for (Role r : kLayerProducts) prepare_f32(r, l);
    prepare_f32(Role::kPreW, 0);
    prepare_f32(Role::kClsW, 0);
    return;
  }
  bf16_.resize(slot(Role::kClsW, 0) + 1);
  auto prepare_one = [&](Role r, int l) {
    const auto [N, K] = shape(r);
    bf16_[slot(r, l)].prepare((*this)(r, l), N, K, with_backward);
  };
  for (int l = 0; l < config_.layers; ++l)
    for (Role r : kLayerProducts) prepare_one(r, l);
  prepare_one(Role::kPreW, 0);
  prepare_one(Role::kClsW, 0);
}

std::vector<std::pair<std::int64_t, std::int64_t>> ModelWeights::unread_ranges() const {
  CHECK(prepared(), "unread_ranges before ModelWeights::prepare");
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  if (with_backward_) return out;
  auto add = [&](Role r, int l) {
    const auto [N, K] = shape(r);
    out.emplace_back(layout_.offset(r, l), N * K);
  };
  for (int l = 0; l < config_.layers; ++l)
    for (Role r : kLayerProducts) add(r, l);
  if (precision_ != Precision::kInt8) {  // int8 runs the head on its fp32 weights
    add(Role::kPreW, 0);
    add(Role::kClsW, 0);
  }
  return out;
}

Linear ModelWeights::linear(Role r, int l) const {
  CHECK(prepared(), "the model's weights were used before ModelWeights::prepare");
  const auto [N, K] = shape(r);
  const bool head = r == Role::kPreW || r == Role::kClsW;
  if (precision_ == Precision::kInt8 && !head) {
    return Linear((*this)(r, l), (*this)(bias_of(r), l), &int8_[slot(r, l)], N, K);
  }
  if (precision_ == Precision::kF32 && !f32_.empty()) {
    return Linear((*this)(r, l), (*this)(bias_of(r), l), &f32_[slot(r, l)], N, K);
  }
  const PreparedWeightBf16* prepared =
      precision_ == Precision::kBF16 ? &bf16_[slot(r, l)] : nullptr;
  return Linear((*this)(r, l), (*this)(bias_of(r), l), prepared, N, K);
}

}  // namespace bertfit
