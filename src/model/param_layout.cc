// Builds the ParamLayout table from what the model's components declare (see param_layout.h).
#include "model/param_layout.h"

#include <utility>

#include "base/check.h"
#include "model/embeddings.h"
#include "model/final_norm.h"
#include "model/head.h"
#include "model/layer.h"
#include "model/relative_positions.h"

namespace bertfit {
namespace {

Role next(Role r) { return static_cast<Role>(static_cast<int>(r) + 1); }

}  // namespace

void LayoutBuilder::group() { groups_.push_back(total_); }

void LayoutBuilder::tensor(std::string name, Role role, Shape shape, bool decay, ParamInit init) {
  const std::int64_t n = shape.numel();
  entries_.push_back({std::move(name), role, layer_, std::move(shape), total_, n, decay, init});
  total_ += n;  // no padding: q, k, v weights (and biases) must be adjacent (model/layer.h)
}

void LayoutBuilder::embedding(std::string name, Role role, std::int64_t rows, std::int64_t C) {
  tensor(std::move(name), role, {rows, C}, true, ParamInit::kNormal);
}

void LayoutBuilder::layer_norm(const std::string& module, Role weight, std::int64_t C, bool bias) {
  tensor(module + ".weight", weight, {C}, false, ParamInit::kOne);
  if (bias) tensor(module + ".bias", next(weight), {C}, false, ParamInit::kZero);
}

void LayoutBuilder::linear(const std::string& module, Role weight, std::int64_t out,
                           std::int64_t in, bool quantized, bool bias) {
  tensor(module + ".weight", weight, {out, in}, true, ParamInit::kNormal);
  if (bias) tensor(module + ".bias", next(weight), {out}, false, ParamInit::kZero);
  product(weight, bias ? next(weight) : kNoBias, out, in, quantized);
}

void LayoutBuilder::product(Role weight, Role bias, std::int64_t N, std::int64_t K,
                            bool quantized) {
  products_.push_back({weight, bias, layer_, N, K, quantized});
}

ParamLayout::ParamLayout(const ModelConfig& c) : layers_(c.layers) {
  LayoutBuilder b;
  b.set_layer(-1);
  Embeddings::declare(c, b);
  if (RelativePositions::used(c)) RelativePositions::declare(c, b);
  for (int l = 0; l < c.layers; ++l) {
    b.set_layer(l);
    EncoderLayer::declare(c, l, b);
  }
  if (FinalNorm::used(c)) FinalNorm::declare(c, b);  // with the last layer
  b.set_layer(c.layers);
  model_head(c).declare(c, b);

  entries_ = std::move(b.entries_);
  products_ = std::move(b.products_);
  total_ = b.total_;
  ready_.assign(b.groups_.rbegin(), b.groups_.rend());
  CHECK(!ready_.empty() && ready_.back() == 0, "the first component declares no gradient group");
  index_.assign(c.layers + 2, {});
  product_.assign(c.layers + 2, {});
  for (auto& r : index_) r.fill(-1);
  for (auto& r : product_) r.fill(-1);
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const ParamEntry& e = entries_[i];
    CHECK(row(e.role, e.layer) == e.layer + 1, "tensor ", e.name, " declared in the wrong part");
    int& slot = index_[e.layer + 1][static_cast<int>(e.role)];
    CHECK(slot < 0, "tensor role declared twice: ", e.name);
    slot = static_cast<int>(i);
  }
  for (std::size_t i = 0; i < products_.size(); ++i) {
    const ProductEntry& p = products_[i];
    // A product covers its weight, or adjacent weights of its shape (q|k|v).
    const ParamEntry& w = entry(p.weight, p.layer);
    const std::int64_t bias_size = p.bias == kNoBias ? p.N : entry(p.bias, p.layer).size;
    CHECK(w.shape.rank() == 2 && w.shape.dims[1] == p.K && p.N % w.shape.dims[0] == 0 &&
              p.N % bias_size == 0 && w.offset + p.N * p.K <= total_,
          "product of ", w.name, " does not fit its tensors");
    product_[p.layer + 1][static_cast<int>(p.weight)] = static_cast<int>(i);
  }
}

int ParamLayout::row(Role role, int layer) const {
  if (role <= Role::kRelLnB) return 0;
  if (role >= Role::kPreW) return layers_ + 1;
  CHECK(layer >= 0 && layer < layers_, "layer ", layer);
  return layer + 1;
}

std::int64_t ParamLayout::offset(Role role, int layer) const { return entry(role, layer).offset; }

bool ParamLayout::has(Role role, int layer) const {
  return index_[row(role, layer)][static_cast<int>(role)] >= 0;
}

const ParamEntry& ParamLayout::entry(Role role, int layer) const {
  const int idx = index_[row(role, layer)][static_cast<int>(role)];
  CHECK(idx >= 0, "role ", static_cast<int>(role), " absent in this layout");
  return entries_[idx];
}

std::size_t ParamLayout::product_index(Role weight, int layer) const {
  const int idx = product_[row(weight, layer)][static_cast<int>(weight)];
  CHECK(idx >= 0, "role ", static_cast<int>(weight), " is not a product's weight");
  return static_cast<std::size_t>(idx);
}

const ParamEntry* ParamLayout::find(std::string_view hf_name) const {
  for (const auto& e : entries_) {
    if (e.name == hf_name) return &e;
  }
  return nullptr;
}

std::int64_t ParamLayout::layer_begin(int l) const {
  for (const auto& e : entries_) {
    if (e.layer == l) return e.offset;
  }
  CHECK(l == layers_, "no layer ", l);
  return total_;  // a head without parameters
}

std::int64_t ParamLayout::layer_end(int l) const {
  return l + 1 <= layers_ ? layer_begin(l + 1) : total_;
}

}  // namespace bertfit
