// Forward and backward of the model: the components in order (see bert.h), and the loss (the
// head's).
#include "model/bert.h"

#include <utility>

#include "base/check.h"
#include "base/log.h"
#include "gemm/gemm.h"
#include "model/embeddings.h"
#include "model/family.h"
#include "model/final_norm.h"
#include "model/head.h"
#include "model/layer.h"
#include "model/relative_positions.h"

namespace bertfit {
namespace {

// Settings every layer of a pass shares.
LayerRun layer_run(const ModelConfig& c, const ModelInput& in, const DropoutState& drop,
                   const Activations& a) {
  LayerRun run;
  run.shape = AttentionShape{in.B, in.T, c.hidden, c.heads, /*skip_padding_queries=*/a.packed};
  run.shape.query_mask = c.family->masks_padding_rows;
  run.mask = in.attention_mask;
  run.dropout = &drop;
  run.p_hidden = drop.train ? static_cast<float>(c.hidden_dropout) : 0.0f;
  run.p_embed = !drop.train                ? 0.0f
                : c.embedding_dropout >= 0 ? static_cast<float>(c.embedding_dropout)
                                           : run.p_hidden;
  run.p_attn = drop.train ? static_cast<float>(c.attention_dropout) : 0.0f;
  return run;
}

}  // namespace

void BertModel::forward(const ModelWeights& w, const ModelInput& in, const DropoutState& drop,
                        Activations& a) const {
  const ModelConfig& c = config_;
  const bool bf16 = precision_ == Precision::kBF16;
  const bool for_backward = drop.train || in.for_backward;
  CHECK(in.T <= c.max_tokens(), "T ", in.T, " > the model's ", c.max_tokens(), " positions");
  CHECK(w.prepared() && w.precision() == precision_ && &w.config() == &config_,
        "forward with weights not prepared for this model");
  CHECK(w.with_backward() || !for_backward,
        "a forward that keeps backward state needs weights prepared with_backward");
  CHECK(precision_ != Precision::kInt8 || !for_backward, "int8 is for inference only");
  // Hidden states of every layer are kept for fp32's backward (it reads them; pre-norm layers'
  // backward reads them in bf16 too) and on request; an inference forward otherwise runs every
  // layer on one layer's buffers.
  a.resize(c, in.B, in.T, for_backward, precision_,
           /*keep_hidden=*/(for_backward && (!bf16 || c.structure.pre_norm)) || in.full_last_layer);
  a.layout_tokens(c, in.input_ids, in.token_type_ids, in.attention_mask, in.unpadded);
  a.for_backward = for_backward;
  const Head& head = model_head(c);
  a.cls_only = !in.full_last_layer && head.first_tokens_only(c);
  const LayerRun run = layer_run(c, in, drop, a);
  Embeddings(w).forward(run, a);
  if (RelativePositions::used(c)) RelativePositions(w).forward(a);
  for (int l = 0; l < c.layers; ++l) EncoderLayer(w, l).forward(run, a);
  if (FinalNorm::used(c)) FinalNorm(w).forward(a);
  head.forward(w, drop, a);
}

double BertModel::loss(const float* labels, float scale, Activations& a) const {
  return model_head(config_).loss(config_, loss_options_, labels, scale, a);
}

void BertModel::set_loss_options(LossOptions options) {
  if (!options.plain()) {
    CHECK(config_.problem() == ProblemType::kSingleLabel,
          "loss options are for single-label classification");
  }
  CHECK(options.class_weights.empty() ||
            static_cast<int>(options.class_weights.size()) == config_.num_labels,
        options.class_weights.size(), " class weights for ", config_.num_labels, " labels");
  loss_options_ = std::move(options);
}

void BertModel::backward(const ModelWeights& w, float* grads, const ModelInput& in,
                         const DropoutState& drop, Activations& a,
                         const std::function<void(std::int64_t)>& on_grads_ready) const {
  const ModelConfig& c = config_;
  CHECK(a.B == in.B && a.T == in.T, "backward on a batch the forward did not see");
  CHECK(w.with_backward(), "backward with weights prepared without backward's copies");
  CHECK(a.for_backward,
        "backward after a forward that kept no backward state (set ModelInput::for_backward or "
        "train dropout)");
  // The layout is in forward order and backward finishes its gradient groups from the end.
  GradsReady ready(layout_.grad_ready_offsets(), on_grads_ready);
  const LayerRun run = layer_run(c, in, drop, a);
  model_head(c).backward(w, drop, grads, a, ready);
  if (FinalNorm::used(c)) {
    FinalNorm(w).backward(grads, a, ready);
    std::swap(a.d_out, a.d_in);
  }
  for (int l = c.layers - 1; l >= 0; --l) {
    EncoderLayer(w, l).backward(run, grads, a, ready);
    std::swap(a.d_out, a.d_in);
  }
  if (RelativePositions::used(c)) RelativePositions(w).backward(grads, a, ready);
  Embeddings(w).backward(run, grads, a, ready);
  CHECK(ready.all_done(), "backward finished fewer gradient groups than the layout declares");
}

}  // namespace bertfit
