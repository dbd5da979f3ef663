// BertModel's contracts that are not numbers: backward reports finished gradients exactly at
// grad_ready_offsets(), in that order, and each report is true (no gradient at or past the
// reported offset changes afterwards), which is what lets a reducer send those buckets while
// backward still runs; and backward after a forward that kept no backward state, or a forward
// with weights not prepared for it, aborts with a message instead of reaching the products.
#include "model/bert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "base/aligned.h"
#include "base/parallel.h"
#include "gemm/gemm.h"
#include "model/family.h"
#include "model/init.h"
#include "model/test_config.h"

namespace bertfit {
namespace {

struct Batch {
  int B = 3, T = 16;
  std::vector<std::int32_t> ids, types, mask;
  explicit Batch(const ModelConfig& c) {
    std::mt19937 rng(1);
    const int lengths[3] = {16, 5, 9};
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        const bool real = t < lengths[b];
        ids.push_back(real ? 1 + static_cast<std::int32_t>(rng() % (c.vocab_size - 1)) : 0);
        types.push_back(0);
        mask.push_back(real ? 1 : 0);
      }
  }
  ModelInput input() const { return {B, T, ids.data(), types.data(), mask.data()}; }
};

void check_ready_reports(const ModelFamily& arch, Precision precision, bool train,
                         HeadKind head = HeadKind::kSequenceClassification) {
  SCOPED_TRACE(std::string(arch.model_type) + " " + head_kind_name(head));
  ModelConfig c = small_test_config(arch, 3);
  c.head = head;
  ParamLayout layout(c);
  AlignedBuffer<float> params(layout.total()), grads(layout.total());
  init_params(layout, c, 5, params.data());
  BertModel model(c, layout, precision);
  Batch batch(c);
  ModelInput in = batch.input();
  in.for_backward = true;  // an eval-mode forward (train false) must keep backward's state too
  Activations acts;
  const DropoutState dropout{.train = train, .seed = 3};
  ModelWeights weights = model.make_weights();
  weights.prepare(params.data(), /*with_backward=*/true);
  model.forward(weights, in, dropout, acts);
  std::vector<float> labels = {0, 2, 1};
  if (head == HeadKind::kTokenClassification) {  // a label per real token, -100 elsewhere
    labels.clear();
    for (std::size_t p = 0; p < batch.mask.size(); ++p)
      labels.push_back(batch.mask[p] != 0 ? static_cast<float>(p % 3) : kIgnoredLabel);
  }
  model.loss(labels.data(), 1.0f, acts);
  grads.zero();
  std::vector<std::int64_t> reported;
  std::vector<std::vector<float>> snapshots;
  model.backward(weights, grads.data(), in, dropout, acts, [&](std::int64_t from) {
    reported.push_back(from);
    snapshots.emplace_back(grads.data() + from, grads.data() + layout.total());
  });
  EXPECT_EQ(reported, model.grad_ready_offsets());
  for (std::size_t i = 0; i < reported.size(); ++i) {
    const float* final_grads = grads.data() + reported[i];
    std::size_t changed = 0;
    for (std::size_t j = 0; j < snapshots[i].size(); ++j)
      changed += snapshots[i][j] != final_grads[j];
    EXPECT_EQ(changed, 0u) << "gradients past offset " << reported[i] << " changed after it";
  }
}

TEST(BertModel, BackwardReportsFinishedGradientsWhereItSays) {
  for (const ModelFamily* arch : model_families()) {
    check_ready_reports(*arch, Precision::kF32, true);
    check_ready_reports(*arch, Precision::kF32, false);
    if (has_native_bf16()) check_ready_reports(*arch, Precision::kBF16, true);
    check_ready_reports(*arch, Precision::kF32, true, HeadKind::kTokenClassification);
  }
}

// An inference forward runs every layer on one layer's buffers; one Activations that goes from
// that form to a training forward (all layers' buffers) and back, at growing sizes, gives
// bit-identical logits and gradients to fresh Activations, in every precision.
TEST(BertModel, ActivationsSwitchBetweenSharedAndPerLayerBuffers) {
  for (Precision precision : {Precision::kF32, Precision::kBF16, Precision::kInt8}) {
    if (precision == Precision::kBF16 && !has_native_bf16()) continue;
    if (precision == Precision::kInt8 && !has_int8_vnni()) continue;
    const bool trains = precision != Precision::kInt8;
    ModelConfig c = small_test_config(model_family("bert"), 3);
    ParamLayout layout(c);
    AlignedBuffer<float> params(layout.total()), grads(layout.total());
    init_params(layout, c, 5, params.data());
    BertModel model(c, layout, precision);
    ModelWeights weights = model.make_weights();
    weights.prepare(params.data(), /*with_backward=*/trains);
    Batch batch(c);
    const std::vector<float> labels = {0, 2, 1};
    auto logits = [&](Activations& a, int B) {
      ModelInput in = batch.input();
      in.B = B;
      model.forward(weights, in, DropoutState{}, a);
      return std::vector<float>(a.logits.data(), a.logits.data() + B * c.num_labels);
    };
    auto gradients = [&](Activations& a) {
      ModelInput in = batch.input();
      in.for_backward = true;
      model.forward(weights, in, DropoutState{}, a);
      model.loss(labels.data(), 1.0f, a);
      grads.zero();
      model.backward(weights, grads.data(), in, DropoutState{}, a);
      return std::vector<float>(grads.data(), grads.data() + layout.total());
    };
    Activations reused;
    Activations fresh1, fresh3;
    const std::vector<float> small = logits(fresh1, 1), full = logits(fresh3, 3);
    EXPECT_EQ(logits(reused, 1), small);
    if (trains) {
      Activations fresh_train;
      const std::vector<float> g = gradients(fresh_train);
      EXPECT_EQ(gradients(reused), g);
    }
    EXPECT_EQ(logits(reused, 3), full);
    EXPECT_EQ(logits(reused, 1), small);
  }
}

// int8 runs LayerNorm, the activation and the next product's quantization inside each product's
// last pass, every thread on its own rows (Linear::forward's `then`): the logits are the same
// bits on one thread and two, padded or unpadded, with every product's output over the size
// at which that pass splits, and over the 1,024-row blocks the int8 products run in (each
// block's epilogue quantizes the next product's input while the later blocks still read this
// one's); and they are fp32's within the quantization's error (a product reading a quantized
// slot that was not filled with its input, or was overwritten, is far off).
TEST(BertModel, Int8FusedPassesDoNotDependOnTheThreadCount) {
  if (!has_int8_vnni()) GTEST_SKIP() << "no VNNI on this CPU";
  ModelConfig c = small_test_config(model_family("distilbert"), 2);
  c.hidden = 128;
  c.intermediate = 512;
  c.layers = 3;
  c.max_positions = 128;
  ParamLayout layout(c);
  AlignedBuffer<float> params(layout.total());
  init_params(layout, c, 7, params.data());
  BertModel model(c, layout, Precision::kInt8);
  ModelWeights weights = model.make_weights();
  weights.prepare(params.data(), /*with_backward=*/false);
  const int B = 10, T = 128;  // 1,270 real rows: the int8 products run in blocks of 1,024
  std::mt19937 rng(2);
  std::vector<std::int32_t> ids(B * T), types(B * T, 0), mask(B * T, 1);
  for (auto& id : ids) id = 1 + static_cast<std::int32_t>(rng() % (c.vocab_size - 1));
  for (int t = 100; t < T; ++t) mask[1 * T + t] = 0;  // one shorter sequence: packed rows
  BertModel model_f32(c, layout, Precision::kF32);
  ModelWeights weights_f32 = model_f32.make_weights();
  weights_f32.prepare(params.data(), /*with_backward=*/false);
  const int saved = num_threads();
  for (bool full_last_layer : {false, true}) {
    Activations af;
    ModelInput in_f32{B, T, ids.data(), types.data(), mask.data()};
    in_f32.full_last_layer = full_last_layer;
    model_f32.forward(weights_f32, in_f32, DropoutState{}, af);
    std::vector<float> first;
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      Activations a;
      ModelInput in{B, T, ids.data(), types.data(), mask.data()};
      in.full_last_layer = full_last_layer;
      model.forward(weights, in, DropoutState{}, a);
      std::vector<float> logits(a.logits.data(), a.logits.data() + B * c.num_labels);
      for (float v : logits) ASSERT_TRUE(std::isfinite(v));
      if (first.empty()) {
        first = logits;
      } else {
        EXPECT_EQ(logits, first) << "full_last_layer " << full_last_layer;
      }
      float err = 0, scale = 0;
      for (int i = 0; i < B * c.num_labels; ++i) {
        err = std::max(err, std::fabs(logits[i] - af.logits.data()[i]));
        scale = std::max(scale, std::fabs(af.logits.data()[i]));
      }
      std::printf("int8 vs fp32 logits: max error %.3g of max |logit| %.3g\n", err, scale);
      // One product alone keeps within 2e-2 relative RMS of fp32 (gemm_test); this model's
      // logits measured 1e-3 of the largest; a product reading a quantized slot that holds
      // another tensor's rows is off by the logits' own size.
      EXPECT_LT(err, 1e-2f * scale);
    }
  }
  set_num_threads(saved);
}

// What unread_ranges() names is really unread: with those parameters set to NaN, a forward
// with weights prepared for inference gives the same logits (fp32 and bf16: the prepared
// copies; int8: the int8 ones, the head in fp32); weights with backward copies name nothing.
TEST(BertModel, UnreadRangesAreNotRead) {
  for (Precision precision : {Precision::kF32, Precision::kBF16, Precision::kInt8}) {
    if (precision == Precision::kBF16 && !has_native_bf16()) continue;
    if (precision == Precision::kInt8 && !has_int8_vnni()) continue;
    ModelConfig c = small_test_config(model_family("distilbert"), 3);
    ParamLayout layout(c);
    AlignedBuffer<float> params(layout.total());
    init_params(layout, c, 5, params.data());
    BertModel model(c, layout, precision);
    ModelWeights weights = model.make_weights();
    if (precision != Precision::kInt8) {
      weights.prepare(params.data(), /*with_backward=*/true);
      EXPECT_TRUE(weights.unread_ranges().empty());
    }
    weights.prepare(params.data(), /*with_backward=*/false);
    Batch batch(c);
    Activations acts;
    model.forward(weights, batch.input(), DropoutState{}, acts);
    const std::vector<float> before(acts.logits.data(), acts.logits.data() + 3 * c.num_labels);
    const auto ranges = weights.unread_ranges();
    EXPECT_EQ(ranges.size(), precision == Precision::kInt8 ? 4u * c.layers : 4u * c.layers + 2);
    for (const auto& [offset, count] : ranges) {
      std::fill_n(params.data() + offset, count, std::numeric_limits<float>::quiet_NaN());
    }
    model.forward(weights, batch.input(), DropoutState{}, acts);
    EXPECT_EQ(std::vector<float>(acts.logits.data(), acts.logits.data() + 3 * c.num_labels),
              before);
  }
}

// DeBERTa's relative-position projections read each layer's query and key weights, which
// unread_ranges() names once prepared for inference: the forward reads the projections the
// weights made at prepare() (ModelWeights::relative_projection) and so reads none of them.
TEST(BertModel, RelativeProjectionsReadNoUnreadRange) {
  for (Precision precision : {Precision::kF32, Precision::kBF16, Precision::kInt8}) {
    if (precision == Precision::kBF16 && !has_native_bf16()) continue;
    if (precision == Precision::kInt8 && !has_int8_vnni()) continue;
    ModelConfig c = small_test_config(model_family("deberta-v2"), 3);
    ASSERT_TRUE(c.relative.enabled);
    ParamLayout layout(c);
    AlignedBuffer<float> params(layout.total());
    init_params(layout, c, 5, params.data());
    BertModel model(c, layout, precision);
    ModelWeights weights = model.make_weights();
    weights.prepare(params.data(), /*with_backward=*/false);
    ASSERT_NE(weights.relative_projection(0), nullptr);
    Batch batch(c);
    Activations acts;
    model.forward(weights, batch.input(), DropoutState{}, acts);
    const std::vector<float> before(acts.logits.data(), acts.logits.data() + 3 * c.num_labels);
    const auto ranges = weights.unread_ranges();
    EXPECT_FALSE(ranges.empty());
    for (const auto& [offset, count] : ranges) {
      std::fill_n(params.data() + offset, count, std::numeric_limits<float>::quiet_NaN());
    }
    model.forward(weights, batch.input(), DropoutState{}, acts);
    EXPECT_EQ(std::vector<float>(acts.logits.data(), acts.logits.data() + 3 * c.num_labels),
              before);
  }
}

TEST(BertModelDeathTest, BackwardWithoutBackwardStateAborts) {
  ModelConfig c = small_test_config(model_family("distilbert"), 2);
  ParamLayout layout(c);
  AlignedBuffer<float> params(layout.total()), grads(layout.total());
  init_params(layout, c, 5, params.data());
  BertModel model(c, layout);
  Batch batch(c);
  Activations acts;
  ModelWeights weights = model.make_weights();
  weights.prepare(params.data(), /*with_backward=*/true);
  model.forward(weights, batch.input(), DropoutState{}, acts);  // eval, no for_backward
  const std::vector<float> labels = {0, 1, 1};
  model.loss(labels.data(), 1.0f, acts);
  EXPECT_DEATH(model.backward(weights, grads.data(), batch.input(), DropoutState{}, acts),
               "kept no backward state");
}

// The prepared weights are the forward's input, not a cache it keeps: using them unprepared, or
// keeping backward state with weights prepared for the forward alone, is refused with a message.
TEST(BertModelDeathTest, ForwardChecksItsWeights) {
  ModelConfig c = small_test_config(model_family("distilbert"), 2);
  ParamLayout layout(c);
  AlignedBuffer<float> params(layout.total());
  init_params(layout, c, 5, params.data());
  BertModel model(c, layout);
  Batch batch(c);
  Activations acts;
  ModelWeights weights = model.make_weights();
  EXPECT_DEATH(model.forward(weights, batch.input(), DropoutState{}, acts), "not prepared");
  weights.prepare(params.data(), /*with_backward=*/false);
  model.forward(weights, batch.input(), DropoutState{}, acts);  // eval: fine
  const DropoutState train{.train = true, .seed = 1};
  EXPECT_DEATH(model.forward(weights, batch.input(), train, acts), "with_backward");
}

}  // namespace
}  // namespace bertfit
