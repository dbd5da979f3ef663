// ParamLayout: the table that describes the one flat fp32 parameter buffer (and, with the same
// offsets, the gradient buffer and Adam's m and v). Layer-major: embeddings, layer 0 .. L-1,
// head. Each entry has its HF name, shape (PyTorch layout: Linear weights are (out, in)),
// offset, whether AdamW's weight decay applies (not to biases and LayerNorm weights, as HF
// Trainer), and how HF initialises it.
//
// Nothing here is kept by hand: the model's components (model/embeddings.h, model/layer.h,
// model/head.h) declare their tensors, their matrix products and their gradient groups into a
// LayoutBuilder, in forward order, and the table, the products ModelWeights prepares and the
// offsets where backward reports finished gradients all follow from those declarations.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/shape.h"
#include "model/config.h"

namespace bertfit {

// What a tensor is to the component that declares it; with the layer, a tensor's identity.
enum class Role : int {
  // Embeddings (model/embeddings.h).
  kWordEmb,
  kPosEmb,
  kTypeEmb,
  kEmbLnW,
  kEmbLnB,
  kProjW,  // embeddings_project: embedding size -> hidden size (ELECTRA)
  kProjB,
  // Relative positions shared by every layer (model/relative_positions.h, DeBERTa): the
  // embeddings and their LayerNorm.
  kRelEmb,
  kRelLnW,
  kRelLnB,
  // An encoder layer (model/layer.h).
  kQW,
  kQB,
  kKW,
  kKB,
  kVW,
  kVB,
  kOW,
  kOB,
  kLn1W,
  kLn1B,
  kFf1W,
  kFf1B,
  kFf2W,
  kFf2B,
  kLn2W,
  kLn2B,
  // The norm after the last layer in pre-norm families (ModernBERT's final_norm), declared with
  // the last layer.
  kFinalLnW,
  kFinalLnB,
  // The head (model/head.h): an optional dense layer (the pooler, pre_classifier,
  // classifier.dense), then the output product (classifier, classifier.out_proj).
  kPreW,
  kPreB,
  kHeadLnW,  // a norm after the dense layer's activation (ModernBERT's head.norm)
  kHeadLnB,
  kClsW,
  kClsB,
  // The embedding head's Dense modules (model/pooling_head.cc): weight and bias of the i-th at
  // dense_role(i) and dense_role(i) + 1, up to kMaxDenseModules.
  kDense0W,
  kDense0B,
  kDense1W,
  kDense1B,
  kDense2W,
  kDense2B,
  kDense3W,
  kDense3B,
  kCount
};
inline constexpr int kNumRoles = static_cast<int>(Role::kCount);
// A product without a bias (ProductEntry::bias), as a config without biases declares them.
inline constexpr Role kNoBias = Role::kCount;
static_assert(static_cast<int>(Role::kCount) - static_cast<int>(Role::kDense0W) ==
              2 * kMaxDenseModules);

// The weight role of the i-th Dense module (its bias is the next role).
inline Role dense_role(std::size_t i) {
  return static_cast<Role>(static_cast<int>(Role::kDense0W) + 2 * static_cast<int>(i));
}
inline Role dense_bias_role(std::size_t i) {
  return static_cast<Role>(static_cast<int>(dense_role(i)) + 1);
}
inline bool is_dense_role(Role r) { return r >= Role::kDense0W && r < Role::kCount; }

enum class ParamInit { kNormal, kZero, kOne };

struct ParamEntry {
  std::string name;  // HF state-dict name
  Role role;
  int layer;  // -1: embeddings; 0..L-1: encoder layer; L: head
  Shape shape;
  std::int64_t offset;  // in floats, into the flat buffer
  std::int64_t size;    // numel
  bool decay;           // weight decay applies
  ParamInit init;
};

// A matrix product y = x·wᵀ + b over a weight (N,K) and bias (N, or kNoBias) of the layout (a
// Linear module, or q|k|v's three adjacent ones). `quantized`: int8 inference runs it in int8 (the
// encoder layers' products); the others stay fp32 there.
struct ProductEntry {
  Role weight, bias;
  int layer;
  std::int64_t N, K;
  bool quantized;
};

// What components declare into, in forward order (their tensors, products and gradient groups).
class LayoutBuilder {
 public:
  // Tensors after this call belong to layer l (-1 embeddings, L head).
  void set_layer(int l) { layer_ = l; }
  // The tensors declared from here on, up to the next group(), form one gradient group: the
  // component's backward finishes their gradients together (model/bert.h, GradsReady).
  void group();
  void tensor(std::string name, Role role, Shape shape, bool decay, ParamInit init);
  // An nn.Embedding of `rows` × C.
  void embedding(std::string name, Role role, std::int64_t rows, std::int64_t C);
  // A LayerNorm module "<module>.weight" / ".bias" (role and role + 1; without `bias`, the
  // weight alone, as LayerNorm(bias=False)).
  void layer_norm(const std::string& module, Role weight, std::int64_t C, bool bias = true);
  // A Linear module (out, in): "<module>.weight" / ".bias" (role and role + 1; without `bias`,
  // the weight alone and a product without bias), and its product.
  void linear(const std::string& module, Role weight, std::int64_t out, std::int64_t in,
              bool quantized, bool bias = true);
  // A product over tensors declared already (q|k|v's adjacent weights and biases).
  void product(Role weight, Role bias, std::int64_t N, std::int64_t K, bool quantized);

 private:
  friend class ParamLayout;
  std::vector<ParamEntry> entries_;
  std::vector<ProductEntry> products_;
  std::vector<std::int64_t> groups_;  // each group's first offset, in forward order
  std::int64_t total_ = 0;
  int layer_ = -1;
};

class ParamLayout {
 public:
  // The components of config's family and head declare the layout.
  explicit ParamLayout(const ModelConfig& config);

  const std::vector<ParamEntry>& entries() const { return entries_; }
  std::int64_t total() const { return total_; }
  // Offset of a role's tensor; layer is ignored for embedding and head roles.
  std::int64_t offset(Role role, int layer = 0) const;
  const ParamEntry& entry(Role role, int layer = 0) const;
  bool has(Role role, int layer = 0) const;
  const ParamEntry* find(std::string_view hf_name) const;  // nullptr if absent
  // [begin, end) offsets of everything belonging to layer l (-1 embeddings, L head).
  std::int64_t layer_begin(int l) const;
  std::int64_t layer_end(int l) const;
  int num_layers() const { return layers_; }

  // Every product, in forward order, and the index of the one whose weight has role r.
  const std::vector<ProductEntry>& products() const { return products_; }
  std::size_t product_index(Role weight, int layer = 0) const;
  // The first offset of each gradient group, from the last group to the first: where backward
  // reports gradients finished, in the order it reports them.
  const std::vector<std::int64_t>& grad_ready_offsets() const { return ready_; }

 private:
  int row(Role role, int layer) const;

  std::vector<ParamEntry> entries_;
  std::vector<ProductEntry> products_;
  std::vector<std::array<int, kNumRoles>> index_;    // [row][role] -> entry index or -1
  std::vector<std::array<int, kNumRoles>> product_;  // [row][weight role] -> product or -1
  std::vector<std::int64_t> ready_;
  std::int64_t total_ = 0;
  int layers_ = 0;
};

}  // namespace bertfit
