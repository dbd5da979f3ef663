// AdamW over the ParamLayout spans (Hugging Face Trainer parameter groups: weight decay only
// on entries whose decay flag is set) and clipping by the global gradient norm, as
// torch.nn.utils.clip_grad_norm_. The learning-rate schedules are train/schedule.h's.
#pragma once

#include <cstdint>
#include <vector>

#include "base/aligned.h"
#include "kernels/optimizer.h"
#include "model/param_layout.h"
#include "train/schedule.h"

namespace bertfit {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
};

// Which entries decay: by default the layout's flags, i.e. HF Trainer 4.28's rule (no decay on
// biases and on the weights of every nn.LayerNorm module, found by module type). A caller can
// replace them, e.g. with the older name rule ("bias" / "LayerNorm.weight" substrings), which
// DOES decay DistilBERT's sa_layer_norm / output_layer_norm weights.
class AdamW {
 public:
  AdamW(const ParamLayout& layout, AdamWConfig config);
  void set_decay(std::vector<bool> decay_per_entry);

  // One update of every parameter with learning rate lr, using grads · grad_scale (the
  // clipping coefficient; grads itself is not modified); step counts from 1.
  void step(float* params, const float* grads, double lr, float grad_scale = 1.0f);

  std::int64_t steps_taken() const { return step_; }
  void set_steps_taken(std::int64_t s) { step_ = s; }
  AlignedBuffer<float>& m() { return m_; }
  AlignedBuffer<float>& v() { return v_; }
  const AlignedBuffer<float>& m() const { return m_; }
  const AlignedBuffer<float>& v() const { return v_; }

 private:
  const ParamLayout& layout_;
  AdamWConfig config_;
  std::vector<bool> decay_;  // per layout entry
  AlignedBuffer<float> m_, v_;
  std::int64_t step_ = 0;
};

// Clipping by the global gradient norm as torch.nn.utils.clip_grad_norm_: the norm is the L2
// norm of all gradients (sum of squares accumulated in double); when it exceeds max_norm the
// gradients are multiplied by max_norm / (norm + 1e-6), rounded to float as torch does.
// Returns that coefficient, or 1 when no clipping applies (also when max_norm <= 0: disabled).
// Pass it to AdamW::step as grad_scale.
double grad_norm(const float* grads, std::int64_t n);
float clip_coefficient(double norm, double max_norm);

}  // namespace bertfit
