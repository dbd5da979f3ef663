// Unpadded execution (ModelInput::unpadded): the token-wise layers run on the real tokens only,
// and the logits, the loss and every gradient equal those of the padded computation. The two
// runs do the same arithmetic on every real token except that the matrix products see a
// different number of rows, which can change oneDNN's blocking and so the order of fp32 sums:
// differences are a few roundings, ~1e-7 relative; the bound 1e-5 (relative L2 per tensor,
// floored at 1e-3 of the largest gradient) is far below the O(1) error of a mis-packed row.
// In bf16 the products' inputs are rounded identically in both modes (elementwise), so the
// same bound holds up to the fp32 accumulation order: 1e-4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "base/aligned.h"
#include "gemm/gemm.h"
#include "model/bert.h"
#include "model/family.h"
#include "model/init.h"
#include "model/test_config.h"

namespace bertfit {
namespace {

double rel_l2(const float* got, const float* want, std::int64_t n, double floor) {
  double d = 0, w = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    d += std::pow(double{got[i]} - want[i], 2);
    w += double{want[i]} * want[i];
  }
  return std::sqrt(d) / std::max(std::sqrt(w), floor);
}

struct Run {
  std::vector<float> logits;
  double loss = 0;
  AlignedBuffer<float> grads;
  bool packed = false;
};

void check(const ModelFamily& arch, Precision precision, double bound) {
  ModelConfig c = small_test_config(arch, 3);
  c.hidden_dropout = c.attention_dropout = c.classifier_dropout = 0.0;
  ParamLayout layout(c);
  AlignedBuffer<float> params(layout.total());
  init_params(layout, c, 17, params.data());
  // Rows of lengths 24 (the longest), 2, 11, 24, 5: padding in most rows, none in two.
  const int B = 5, T = 24;
  const int lengths[B] = {24, 2, 11, 24, 5};
  std::mt19937 rng(3);
  std::vector<std::int32_t> ids(B * T, c.pad_token_id), types(B * T, 0), mask(B * T, 0);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < lengths[b]; ++t) {
      ids[b * T + t] = 1 + static_cast<std::int32_t>(rng() % (c.vocab_size - 1));
      types[b * T + t] = t >= lengths[b] / 2 ? 1 : 0;
      mask[b * T + t] = 1;
    }
  const std::vector<float> labels = {0, 2, 1, 1, 0};
  BertModel model(c, layout, precision);
  ModelWeights weights = model.make_weights();
  weights.prepare(params.data(), /*with_backward=*/true);
  auto run = [&](bool unpadded) {
    ModelInput in{B, T, ids.data(), types.data(), mask.data()};
    in.unpadded = unpadded;
    Activations acts;
    const DropoutState train{.train = true, .seed = 5};
    model.forward(weights, in, train, acts);
    Run r;
    r.loss = model.loss(labels.data(), 1.0f, acts);
    r.logits.assign(acts.logits.data(), acts.logits.data() + B * c.num_labels);
    r.grads = AlignedBuffer<float>(layout.total());
    model.backward(weights, r.grads.data(), in, train, acts);
    r.packed = acts.packed;
    return r;
  };
  Run padded = run(false), unpadded = run(true);
  ASSERT_FALSE(padded.packed);
  ASSERT_TRUE(unpadded.packed);
  EXPECT_LT(rel_l2(unpadded.logits.data(), padded.logits.data(), B * c.num_labels, 0), bound);
  EXPECT_NEAR(unpadded.loss, padded.loss, bound * std::fabs(padded.loss));
  double largest = 0;
  for (const ParamEntry& e : layout.entries()) {
    double s = 0;
    for (std::int64_t i = 0; i < e.size; ++i) s += std::pow(padded.grads.data()[e.offset + i], 2);
    largest = std::max(largest, std::sqrt(s));
  }
  for (const ParamEntry& e : layout.entries()) {
    EXPECT_LT(rel_l2(unpadded.grads.data() + e.offset, padded.grads.data() + e.offset, e.size,
                     1e-3 * largest),
              bound)
        << e.name;
  }
}

TEST(Unpadded, DistilBertEqualsPaddedFp32) {
  check(model_family("distilbert"), Precision::kF32, 1e-5);
}
TEST(Unpadded, BertEqualsPaddedFp32) { check(model_family("bert"), Precision::kF32, 1e-5); }
TEST(Unpadded, BertEqualsPaddedBf16) {
  if (!has_native_bf16()) GTEST_SKIP() << "no native bf16 on this CPU";
  check(model_family("bert"), Precision::kBF16, 1e-4);
}

}  // namespace
}  // namespace bertfit
