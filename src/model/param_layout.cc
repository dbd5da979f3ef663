// Builds the ParamLayout table with the Hugging Face names the model's family declares.
#include "model/param_layout.h"

#include <utility>

#include "base/check.h"
#include "model/family.h"

namespace bertfit {
namespace {

Role next(Role r) { return static_cast<Role>(static_cast<int>(r) + 1); }

}  // namespace

ParamLayout::ParamLayout(const ModelConfig& c) : layers_(c.layers) {
  const ModelFamily& family = *c.family;
  const std::int64_t C = c.hidden, I = c.intermediate;
  index_.assign(c.layers + 2, {});
  for (auto& row : index_) row.fill(-1);

  auto add = [&](std::string name, Role role, int layer, Shape shape, bool decay, ParamInit init) {
    std::int64_t n = shape.numel();
    index_[layer + 1][static_cast<int>(role)] = static_cast<int>(entries_.size());
    entries_.push_back({std::move(name), role, layer, std::move(shape), total_, n, decay, init});
    total_ += n;  // no padding: q, k, v weights (and biases) must be adjacent (see below)
  };
  // A Linear or LayerNorm module: weight then bias.
  auto add_module = [&](const std::string& prefix, Role weight_role, int layer, Shape wshape,
                        bool layer_norm) {
    std::int64_t out = wshape.dims[0];
    add(prefix + ".weight", weight_role, layer, wshape, !layer_norm,
        layer_norm ? ParamInit::kOne : ParamInit::kNormal);
    add(prefix + ".bias", next(weight_role), layer, Shape{out}, false, ParamInit::kZero);
  };

  const EmbeddingNames& emb = family.embeddings;
  const std::string e = emb.prefix;
  add(e + emb.word + ".weight", Role::kWordEmb, -1, {c.vocab_size, C}, true, ParamInit::kNormal);
  add(e + emb.position + ".weight", Role::kPosEmb, -1, {c.max_positions, C}, true,
      ParamInit::kNormal);
  if (family.token_types()) {
    add(e + emb.token_type + ".weight", Role::kTypeEmb, -1, {c.type_vocab_size, C}, true,
        ParamInit::kNormal);
  }
  add_module(e + emb.layer_norm, Role::kEmbLnW, -1, {C}, true);

  const LayerNames& n = family.layer;
  for (int l = 0; l < c.layers; ++l) {
    const std::string prefix = n.prefix + std::to_string(l) + ".";
    // The q, k and v projections go first as [q.w k.w v.w q.b k.b v.b] so that they form
    // one (3C, C) weight and one (3C) bias: a single fused QKV matrix product.
    const std::pair<Role, const char*> qkv[] = {
        {Role::kQW, n.q}, {Role::kKW, n.k}, {Role::kVW, n.v}};
    for (auto [role, name] : qkv) {
      add(prefix + name + ".weight", role, l, {C, C}, true, ParamInit::kNormal);
    }
    for (auto [role, name] : qkv) {
      add(prefix + name + ".bias", next(role), l, {C}, false, ParamInit::kZero);
    }
    add_module(prefix + n.o, Role::kOW, l, {C, C}, false);
    add_module(prefix + n.ln1, Role::kLn1W, l, {C}, true);
    add_module(prefix + n.ff1, Role::kFf1W, l, {I, C}, false);
    add_module(prefix + n.ff2, Role::kFf2W, l, {C, I}, false);
    add_module(prefix + n.ln2, Role::kLn2W, l, {C}, true);
  }
  add_module(family.head.dense, Role::kPreW, c.layers, {C, C}, false);
  add_module(family.head.out, Role::kClsW, c.layers, {c.num_labels, C}, false);
}

std::int64_t ParamLayout::offset(Role role, int layer) const { return entry(role, layer).offset; }

const ParamEntry& ParamLayout::entry(Role role, int layer) const {
  int r = static_cast<int>(role);
  int row;
  if (role <= Role::kEmbLnB) {
    row = 0;
  } else if (role >= Role::kPreW) {
    row = layers_ + 1;
  } else {
    CHECK(layer >= 0 && layer < layers_, "layer ", layer);
    row = layer + 1;
  }
  int idx = index_[row][r];
  CHECK(idx >= 0, "role ", r, " absent in this layout");
  return entries_[idx];
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
  CHECK(false, "no layer ", l);
}

std::int64_t ParamLayout::layer_end(int l) const {
  return l + 1 <= layers_ ? layer_begin(l + 1) : total_;
}

}  // namespace bertfit
