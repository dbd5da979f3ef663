// Label smoothing and class weights against the real thing: Trainer's LabelSmoother
// (transformers 4.28.1) and torch.nn.CrossEntropyLoss(weight, label_smoothing), losses and
// gradients recorded by tests/fixtures/make_loss_fixture.py in tests/fixtures/losses.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/file.h"
#include "kernels/loss.h"

namespace bertfit {
namespace {

// Tolerances. torch_ce ran in float64 on the same float logits: the formulas agree up to double
// rounding of sums of <= 3K terms of order |logits| <= 4 (1e-12 relative is generous). Our
// gradient comes from the probabilities rounded to float (2^-24 relative each, which p - 1
// turns into an absolute error) and is rounded once to float: per entry <= 2^-24·|g| +
// 2^-24·p·((1-eps)·w[y] + eps/K·Σw) / Σ_b w[y_b] <= 2^-24·|g| + 2^-24·max(w) / Σ_b w[y_b];
// twice that is the bound. LabelSmoother ran in float32 (as Trainer does): log_softmax and
// the sums over B·K <= 27 terms each round to float, ~27·2^-24 ≈ 1.6e-6 relative to the loss's
// terms; its gradients are float32 autograd values, off by a few float ulps of the largest
// entry: 1e-6 relative to the loss (of order 1) and 1e-6 absolute on the gradients. Dropping
// the smoothing term or the weights moves both by >= 1e-2 here.
constexpr double kF64Loss = 1e-12, kF32 = 1e-6;

TEST(LossOracle, LabelSmoothingAndClassWeightsMatchTorch) {
  const nlohmann::json f = nlohmann::json::parse(
      read_file(std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/losses.json"));
  ASSERT_EQ(f["transformers"], "4.28.1");
  int smoother_cases = 0, torch_cases = 0;
  for (const nlohmann::json& c : f["cases"]) {
    const int B = c["B"], K = c["K"];
    const double eps = c["epsilon"];
    SCOPED_TRACE(::testing::Message() << "B=" << B << " K=" << K << " eps=" << eps);
    const std::vector<float> logits = c["logits"].get<std::vector<float>>();
    const std::vector<std::int32_t> labels = c["labels"].get<std::vector<std::int32_t>>();
    std::vector<double> weights;
    if (!c["weights"].is_null()) weights = c["weights"].get<std::vector<double>>();
    const double* w = weights.empty() ? nullptr : weights.data();
    std::vector<float> probs(B * K), dlogits(B * K, 0.0f);
    const double loss =
        weighted_cross_entropy_forward(probs.data(), logits.data(), labels.data(), B, K, w, eps);
    weighted_cross_entropy_backward(dlogits.data(), probs.data(), labels.data(), B, K, w, eps,
                                    1.0f);
    double max_w = 1, label_weights = B;
    if (w != nullptr) {
      max_w = *std::max_element(weights.begin(), weights.end());
      label_weights = 0;
      for (int b = 0; b < B; ++b) label_weights += weights[labels[b]];
    }
    auto check = [&](const nlohmann::json& want, double loss_tol, double grad_rel,
                     double grad_abs) {
      const double want_loss = want["loss"];
      EXPECT_NEAR(loss, want_loss, loss_tol * want_loss);
      const std::vector<double> want_d = want["dlogits"].get<std::vector<double>>();
      ASSERT_EQ(want_d.size(), dlogits.size());
      for (std::size_t i = 0; i < want_d.size(); ++i) {
        EXPECT_NEAR(dlogits[i], want_d[i], grad_rel * std::fabs(want_d[i]) + grad_abs) << i;
      }
    };
    if (c.contains("label_smoother")) {
      SCOPED_TRACE("LabelSmoother");
      check(c["label_smoother"], kF32, 0, kF32);
      ++smoother_cases;
    }
    SCOPED_TRACE("CrossEntropyLoss");
    check(c["torch_ce"], kF64Loss, 0x1p-23, 0x1p-23 * max_w / label_weights);
    ++torch_cases;
  }
  EXPECT_EQ(smoother_cases, 2);
  EXPECT_EQ(torch_cases, 5);
}

}  // namespace
}  // namespace bertfit
