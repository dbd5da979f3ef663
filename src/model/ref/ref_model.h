// A double-precision reference of the whole sequence or token classifier (the config's head):
// Hugging Face's formulas written out on the padded (B,T) layout with the scalar kernels of
// kernels/ref, each tensor looked up by its role (q, k and v separately), no unpadding, no
// first-token shortcut, no prepared weights. The oracle of the model-level tests: it shares no code
// path with BertModel beyond the kernel references and the parameter table. Dropout is not modelled
// (eval mode, or a config whose dropout probabilities are 0).
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/param_layout.h"

namespace bertfit::ref {

struct ModelBatch {
  int B = 0, T = 0;
  std::vector<std::int32_t> input_ids, token_type_ids, attention_mask;  // (B,T)
  // Sequence head: single-label, (B) class ids; regression, (B) targets; multi-label, (B,K)
  // multi-hot rows. Token head: (B,T) class ids, -100 where no label applies (at least one
  // must). Empty: logits only.
  std::vector<double> labels;
};

struct ModelResult {
  std::vector<double> logits;  // (B,K); token head: (B·T,K), every position (padding too)
  double loss = 0;  // as transformers computes it for the head and problem type (token head: the
                    // mean cross-entropy over the positions whose label is not -100)
  std::vector<double> grads;  // d loss / d params in the layout's order (empty without labels)
};

ModelResult model_forward_backward(const ModelConfig& config, const ParamLayout& layout,
                                   const std::vector<double>& params, const ModelBatch& batch);

}  // namespace bertfit::ref
