// AdamW over layout spans and gradient clipping.
#include "train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace bertfit {

AdamW::AdamW(const ParamLayout& layout, AdamWConfig config)
    : layout_(layout), config_(config), m_(layout.total()), v_(layout.total()) {
  for (const ParamEntry& e : layout.entries()) decay_.push_back(e.decay);
}

void AdamW::set_decay(std::vector<bool> decay_per_entry) {
  CHECK(decay_per_entry.size() == layout_.entries().size(), "decay mask size");
  decay_ = std::move(decay_per_entry);
}

void AdamW::step(float* params, const float* grads, double lr, float grad_scale) {
  ++step_;
  AdamWParams h;
  h.lr = lr;
  h.beta1 = config_.beta1;
  h.beta2 = config_.beta2;
  h.eps = config_.eps;
  h.weight_decay = config_.weight_decay;
  h.step = step_;
  h.grad_scale = grad_scale;
  const auto& entries = layout_.entries();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const ParamEntry& e = entries[i];
    adamw_update(params + e.offset, grads + e.offset, m_.data() + e.offset, v_.data() + e.offset,
                 e.size, h, decay_[i] && config_.weight_decay != 0.0);
  }
}

double grad_norm(const float* grads, std::int64_t n) { return std::sqrt(sum_squares(grads, n)); }

float clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0) return 1.0f;
  // torch: clip_coef = max_norm / (total_norm + 1e-6), applied when < 1 (float32 scalar).
  const float coef = static_cast<float>(max_norm / (norm + 1e-6));
  return coef < 1.0f ? coef : 1.0f;
}

}  // namespace bertfit
