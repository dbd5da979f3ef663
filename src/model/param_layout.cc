// Builds the ParamLayout table with Hugging Face names for DistilBERT and BERT classifiers.
#include "model/param_layout.h"

#include <span>

#include "base/check.h"

namespace bertfit {
namespace {

struct RoleSpec {
  Role role;
  const char* distilbert;
  const char* bert;
};

// Per-layer tensors in buffer order, as <module>.weight / <module>.bias pairs.
constexpr RoleSpec kLayerModules[] = {
    {Role::kQW, "attention.q_lin", "attention.self.query"},
    {Role::kKW, "attention.k_lin", "attention.self.key"},
    {Role::kVW, "attention.v_lin", "attention.self.value"},
    {Role::kOW, "attention.out_lin", "attention.output.dense"},
    {Role::kLn1W, "sa_layer_norm", "attention.output.LayerNorm"},
    {Role::kFf1W, "ffn.lin1", "intermediate.dense"},
    {Role::kFf2W, "ffn.lin2", "output.dense"},
    {Role::kLn2W, "output_layer_norm", "output.LayerNorm"},
};

Role next(Role r) { return static_cast<Role>(static_cast<int>(r) + 1); }

}  // namespace

ParamLayout::ParamLayout(const ModelConfig& c) : layers_(c.layers) {
  const bool bert = c.arch == Arch::kBert;
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

  const std::string base = bert ? "bert." : "distilbert.";
  const std::string emb = base + "embeddings.";
  add(emb + "word_embeddings.weight", Role::kWordEmb, -1, {c.vocab_size, C}, true,
      ParamInit::kNormal);
  add(emb + "position_embeddings.weight", Role::kPosEmb, -1, {c.max_positions, C}, true,
      ParamInit::kNormal);
  if (bert) {
    add(emb + "token_type_embeddings.weight", Role::kTypeEmb, -1, {c.type_vocab_size, C}, true,
        ParamInit::kNormal);
  }
  add_module(emb + "LayerNorm", Role::kEmbLnW, -1, {C}, true);

  for (int l = 0; l < c.layers; ++l) {
    std::string prefix =
        base + (bert ? "encoder.layer." : "transformer.layer.") + std::to_string(l) + ".";
    // The q, k and v projections go first as [q.w k.w v.w q.b k.b v.b] so that they form
    // one (3C, C) weight and one (3C) bias: a single fused QKV matrix product.
    for (int i = 0; i < 3; ++i) {
      const RoleSpec& m = kLayerModules[i];
      add(prefix + (bert ? m.bert : m.distilbert) + ".weight", m.role, l, {C, C}, true,
          ParamInit::kNormal);
    }
    for (int i = 0; i < 3; ++i) {
      const RoleSpec& m = kLayerModules[i];
      add(prefix + (bert ? m.bert : m.distilbert) + ".bias", next(m.role), l, {C}, false,
          ParamInit::kZero);
    }
    for (const RoleSpec& m : std::span(kLayerModules).subspan(3)) {
      bool ln = m.role == Role::kLn1W || m.role == Role::kLn2W;
      Shape shape = ln                      ? Shape{C}
                    : m.role == Role::kFf1W ? Shape{I, C}
                    : m.role == Role::kFf2W ? Shape{C, I}
                                            : Shape{C, C};
      add_module(prefix + (bert ? m.bert : m.distilbert), m.role, l, shape, ln);
    }
  }
  add_module(bert ? "bert.pooler.dense" : "pre_classifier", Role::kPreW, c.layers, {C, C}, false);
  add_module("classifier", Role::kClsW, c.layers, {c.num_labels, C}, false);
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
