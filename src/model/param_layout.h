// ParamLayout: the table that describes the one flat fp32 parameter buffer (and, with the same
// offsets, the gradient buffer and Adam's m and v). Layer-major: embeddings, layer 0 .. L-1,
// head (pre_classifier or pooler, then classifier). Each entry has its HF name, shape (PyTorch
// layout: Linear weights are (out, in)), offset, whether AdamW's weight decay applies (not to
// biases and LayerNorm weights, as HF Trainer), and how HF initialises it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/shape.h"
#include "model/config.h"

namespace bertfit {

enum class Role : int {
  kWordEmb,
  kPosEmb,
  kTypeEmb,
  kEmbLnW,
  kEmbLnB,
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
  kPreW,
  kPreB,
  kClsW,
  kClsB,
  kCount
};
inline constexpr int kNumRoles = static_cast<int>(Role::kCount);

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

class ParamLayout {
 public:
  explicit ParamLayout(const ModelConfig& config);

  const std::vector<ParamEntry>& entries() const { return entries_; }
  std::int64_t total() const { return total_; }
  // Offset of a role's tensor; layer is ignored for embedding and head roles.
  std::int64_t offset(Role role, int layer = 0) const;
  const ParamEntry& entry(Role role, int layer = 0) const;
  const ParamEntry* find(std::string_view hf_name) const;  // nullptr if absent
  // [begin, end) offsets of everything belonging to layer l (-1 embeddings, L head).
  std::int64_t layer_begin(int l) const;
  std::int64_t layer_end(int l) const;
  int num_layers() const { return layers_; }

 private:
  std::vector<ParamEntry> entries_;
  std::vector<std::array<int, kNumRoles>> index_;  // [layer + 1][role] -> entry index or -1
  std::int64_t total_ = 0;
  int layers_ = 0;
};

}  // namespace bertfit
