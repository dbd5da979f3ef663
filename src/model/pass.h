// What the components of one forward or backward pass (model/embeddings.h, model/layer.h,
// model/head.h) share: the dropout state and its sites, the settings every layer reads, and
// backward's reports of finished gradients.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/check.h"
#include "kernels/attention.h"
#include "kernels/dropout.h"

namespace bertfit {

// Dropout is active when train is true; each site's mask is keyed by (seed, step, micro,
// layer, site), so a step can be replayed exactly.
struct DropoutState {
  bool train = false;
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  std::uint64_t micro = 0;
};

// Dropout sites within a layer, for dropout keys.
enum DropoutSite : std::uint32_t {
  kSiteEmbeddings = 0,
  kSiteAttentionProbs = 1,
  kSiteAttentionOutput = 2,
  kSiteFfnOutput = 3,
  kSiteClassifier = 4,
  kSiteHeadInput = 5,           // the first token's state, in heads that drop it (RoBERTa's)
  kSiteRelativeEmbeddings = 6,  // a layer's relative-position embeddings (DeBERTa's pos_dropout)
};

inline std::uint64_t dropout_key(const DropoutState& d, int layer, DropoutSite site) {
  return dropout_key(d.seed, d.step, d.micro, static_cast<std::uint32_t>(layer), site);
}

// What every layer of one forward (and its backward) shares.
struct LayerRun {
  AttentionShape shape;                // the padded (B,T) batch; skips padding queries if packed
  const std::int32_t* mask = nullptr;  // (B,T) attention mask
  const DropoutState* dropout = nullptr;
  float p_hidden = 0, p_attn = 0;  // dropout probabilities (0 outside training)
  float p_embed = 0;               // the embeddings' (embedding_dropout, else p_hidden)
};

// Backward's reports of finished gradients. The layout's gradient groups (ParamLayout::
// grad_ready_offsets, declared by the components) are finished from the last to the first: each
// component's backward calls done() after each of its groups, and report(o) then says that every
// gradient at flat offsets >= o is final (a reducer may send those buckets).
class GradsReady {
 public:
  GradsReady(const std::vector<std::int64_t>& offsets,
             const std::function<void(std::int64_t)>& report)
      : offsets_(offsets), report_(report) {}
  void done() {
    CHECK(next_ < offsets_.size(), "backward finished more gradient groups than declared");
    const std::int64_t o = offsets_[next_++];
    if (report_) report_(o);
  }
  bool all_done() const { return next_ == offsets_.size(); }

 private:
  const std::vector<std::int64_t>& offsets_;
  const std::function<void(std::int64_t)>& report_;
  std::size_t next_ = 0;
};

}  // namespace bertfit
