// Clipping by the global norm (torch.nn.utils.clip_grad_norm_'s coefficient) and AdamW::step's
// use of it: a clipped step equals an unclipped step on gradients multiplied by the
// coefficient first, as torch does in place.
#include "train/optimizer.h"

#include <gtest/gtest.h>

#include <vector>

#include "model/family.h"
#include "model/param_layout.h"
#include "model/test_config.h"

namespace bertfit {
namespace {

TEST(Clipping, NormAndCoefficient) {
  const std::vector<float> g = {3.0f, 0.0f, -4.0f};
  EXPECT_DOUBLE_EQ(grad_norm(g.data(), 3), 5.0);
  EXPECT_EQ(clip_coefficient(5.0, 1.0), static_cast<float>(1.0 / (5.0 + 1e-6)));
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0f);   // below the limit: untouched
  EXPECT_LT(clip_coefficient(1.0, 1.0), 1.0f);   // at the limit torch scales by 1 / (1 + 1e-6)
  EXPECT_EQ(clip_coefficient(50.0, 0.0), 1.0f);  // max_grad_norm 0 disables clipping
  EXPECT_EQ(clip_coefficient(50.0, -1.0), 1.0f);
}

TEST(AdamWStep, GradScaleEqualsScaledGradients) {
  // decayed weights and undecayed biases / LayerNorms
  const ParamLayout layout(small_test_config(model_family("distilbert"), 2));
  const auto n = static_cast<std::size_t>(layout.total());
  std::vector<float> p0(n), g(n), g_scaled(n);
  for (std::size_t i = 0; i < n; ++i) {
    p0[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
    g[i] = 0.05f * static_cast<float>(i % 5) - 0.1f;
  }
  const float coef = clip_coefficient(7.5, 1.0);
  for (std::size_t i = 0; i < n; ++i) g_scaled[i] = g[i] * coef;
  AdamW fused(layout, {.weight_decay = 0.01}), reference(layout, {.weight_decay = 0.01});
  std::vector<float> p_fused = p0, p_reference = p0;
  for (int step = 0; step < 3; ++step) {
    fused.step(p_fused.data(), g.data(), 1e-3, coef);
    reference.step(p_reference.data(), g_scaled.data(), 1e-3);
  }
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(p_fused[i], p_reference[i]) << i;
    ASSERT_EQ(fused.m().data()[i], reference.m().data()[i]) << i;
    ASSERT_EQ(fused.v().data()[i], reference.v().data()[i]) << i;
  }
  EXPECT_NE(p_fused, p0);
}

}  // namespace
}  // namespace bertfit
