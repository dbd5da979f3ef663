// predict_logits prepares the bf16 weights once per call (ModelWeights) and reuses them for
// every batch: the logits must be those of forwards that prepare afresh, and a later call, or a
// training forward on the same scratch activations, must not see anything of the parameters'
// earlier values. Same shapes on both sides, so the results are bit-exact.
#include "task/evaluate.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "base/aligned.h"
#include "model/family.h"
#include "model/init.h"
#include "model/test_config.h"

namespace bertfit {
namespace {

struct Tiny {
  ModelConfig c;
  ParamLayout layout;
  AlignedBuffer<float> params;
  BertModel model;
  std::vector<EncodedExample> examples;

  Tiny()
      : c(small_test_config(model_family("distilbert"), 2)),
        layout(c),
        params(layout.total()),
        model(c, layout, Precision::kBF16) {
    init_params(layout, c, 17, params.data());
    std::mt19937 rng(5);
    for (int len : {9, 3, 17, 9, 30, 5, 12}) {
      EncodedExample e;
      e.ids.push_back(101);
      for (int t = 1; t < len; ++t) e.ids.push_back(1 + static_cast<std::int32_t>(rng() % 199));
      e.type_ids.assign(e.ids.size(), 0);
      examples.push_back(e);
    }
  }
};

TEST(PredictLogits, ReusedBf16WeightsGiveTheLogitsOfFreshlyPreparedOnes) {
  Tiny t;
  // One call, seven batches of one example: the weights are prepared in the first only.
  Activations scratch;
  const std::vector<float> got =
      predict_logits(t.model, t.params.data(), t.examples, 1, 1, &scratch);
  for (std::size_t i = 0; i < t.examples.size(); ++i) {
    // A call per example, each with its own activations: prepared afresh every time.
    const std::vector<float> want = predict_logits(t.model, t.params.data(), {t.examples[i]}, 1, 1);
    for (int k = 0; k < t.c.num_labels; ++k) EXPECT_EQ(got[i * t.c.num_labels + k], want[k]) << i;
  }
}

TEST(PredictLogits, ParametersChangedBetweenCallsArePreparedAfresh) {
  Tiny t;
  Activations scratch;
  const std::vector<float> before =
      predict_logits(t.model, t.params.data(), t.examples, 3, 8, &scratch);
  init_params(t.layout, t.c, 18, t.params.data());  // new values at the same address
  const std::vector<float> after =
      predict_logits(t.model, t.params.data(), t.examples, 3, 8, &scratch);
  const std::vector<float> fresh = predict_logits(t.model, t.params.data(), t.examples, 3, 8);
  EXPECT_EQ(after, fresh);
  EXPECT_NE(after, before);
}

TEST(PredictLogits, TrainingForwardAfterEvaluationPreparesForBackward) {
  Tiny t;
  const int B = 2, T = 8;
  std::vector<std::int32_t> ids(B * T, 7), types(B * T, 0), mask(B * T, 1);
  ids[0] = ids[T] = 101;
  const float labels[B] = {0, 1};
  const ModelInput in{B, T, ids.data(), types.data(), mask.data()};
  const DropoutState train{.train = true, .seed = 3};
  auto gradients = [&](Activations& acts) {
    AlignedBuffer<float> grads(t.layout.total());
    ModelWeights w = t.model.make_weights();
    w.prepare(t.params.data(), /*with_backward=*/true);
    t.model.forward(w, in, train, acts);
    t.model.loss(labels, 1.0f, acts);
    t.model.backward(w, grads.data(), in, train, acts);
    return std::vector<float>(grads.data(), grads.data() + t.layout.total());
  };
  Activations scratch, fresh;
  predict_logits(t.model, t.params.data(), t.examples, 4, 8, &scratch);  // forward-only layouts
  EXPECT_EQ(gradients(scratch), gradients(fresh));
}

// --metric-for-best-model is checked against task_metric_names before a run starts: they must
// be exactly the names score_logits reports, for every kind of task.
TEST(TaskMetricNames, AreTheNamesScoreLogitsReports) {
  std::vector<TaskInfo> tasks = {glue_task_info("mrpc"), glue_task_info("stsb"),
                                 glue_task_info("cola"), glue_task_info("sst2"),
                                 custom_task_info(ProblemType::kMultiLabel, {"a", "b", "c"})};
  for (const TaskInfo& task : tasks) {
    const int K = task.num_labels();
    std::vector<EncodedExample> examples(4);
    for (std::size_t i = 0; i < examples.size(); ++i) {
      examples[i].label =
          task.regression() ? 0.5f * static_cast<float>(i) : static_cast<float>(i % 2);
      examples[i].label_ids = {static_cast<std::int32_t>(i % 2)};
    }
    std::vector<float> logits(examples.size() * K);
    for (std::size_t j = 0; j < logits.size(); ++j) logits[j] = 0.1f * static_cast<float>(j % 5);
    EvalResult r = score_logits(logits, examples, task, K);
    std::vector<std::string> reported;
    for (auto& [name, value] : r.metrics) reported.push_back(name);
    EXPECT_EQ(reported, task_metric_names(task)) << task.name;
    EXPECT_FALSE(reported.empty()) << task.name;
  }
}

}  // namespace
}  // namespace bertfit
