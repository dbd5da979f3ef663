// The reference model is itself checked before it judges anything:
//   - against Hugging Face's numbers: eval logits, the loss and every gradient of the golden
//     models (dropout 0), sequence classifiers and token classifiers (bert-tokcls-tiny,
//     roberta-tokcls-tiny: -100 on special tokens, later sub-tokens and padding), at the golden
//     tests' tolerance (tests/golden/golden_test.cc argues 1e-4 relative L2 per tensor for fp32
//     against double; the reference is double, so its own error is negligible);
//   - its gradients against central finite differences of its own loss, both heads of every
//     family on a tiny random model (ELECTRA with its projection), a padded batch whose token
//     labels are -100 on the first token, padding and one real token. Step h = 1e-5 in double:
//     truncation errs by ~h²·|f⁽³⁾| ≈ 1e-10 and rounding by ~1e-16·|f| / h ≈ 1e-11, so 1e-6
//     relative per tensor (against 1e-3 of the largest tensor's norm, for the attention key
//     biases whose true gradient is 0) leaves room, while a wrong factor (the loss averaged over
//     every position instead of the labelled ones, a missing term) errs by O(1).
#include "model/ref/ref_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/file.h"
#include "io/safetensors.h"
#include "model/family.h"
#include "model/init.h"
#include "model/model_io.h"
#include "tests/util/compare.h"

namespace bertfit {
namespace {

using testing::read_tensor;
using testing::rel_err;

std::vector<std::int32_t> matrix(const nlohmann::json& j) {
  std::vector<std::int32_t> out;
  for (const auto& row : j)
    for (const auto& v : row) out.push_back(v.get<std::int32_t>());
  return out;
}

class RefModelGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(RefModelGolden, MatchesTransformers) {
  const std::string dir = std::string(BERTFIT_SHARED_DIR) + "/golden/" + GetParam();
  // The golden config.json names no architecture; golden.json says the head.
  const nlohmann::json golden_info = nlohmann::json::parse(read_file(dir + "/golden.json"));
  ModelConfig config = parse_model_config(read_file(dir + "/model/config.json"), "config.json");
  if (golden_info.value("kind", "") == "token_classification") {
    config.head = HeadKind::kTokenClassification;
  }
  ModelState state = load_model(dir + "/model", {.config = &config});
  const nlohmann::json batch = nlohmann::json::parse(read_file(dir + "/batch.json"));
  ref::ModelBatch in;
  in.B = static_cast<int>(batch["input_ids"].size());
  in.T = static_cast<int>(batch["input_ids"][0].size());
  in.input_ids = matrix(batch["input_ids"]);
  in.attention_mask = matrix(batch["attention_mask"]);
  in.token_type_ids = matrix(batch["token_type_ids"]);
  for (const auto& l : batch["labels"]) {
    if (!l.is_array()) {
      in.labels.push_back(l.get<double>());
      continue;
    }
    for (const auto& t : l) in.labels.push_back(t.get<double>());  // a token classifier's row
  }
  std::vector<double> params(state.params.data(), state.params.data() + state.layout.total());
  ref::ModelResult r = ref::model_forward_backward(state.config, state.layout, params, in);
  SafetensorsFile golden = SafetensorsFile::open(dir + "/golden.safetensors");
  EXPECT_LT(rel_err(r.logits, read_tensor(golden, "eval.logits")), 1e-4);
  const float loss = read_tensor(golden, "train.loss")[0];
  EXPECT_NEAR(r.loss, loss, 1e-5 * std::fabs(loss));
  double largest = 0;
  for (const ParamEntry& e : state.layout.entries()) {
    auto g = read_tensor(golden, "grad." + e.name);
    largest = std::max(largest, testing::l2(g.data(), g.size()));
  }
  for (const ParamEntry& e : state.layout.entries()) {
    const auto want = read_tensor(golden, "grad." + e.name);
    EXPECT_LT(rel_err(r.grads.data() + e.offset, want.data(), want.size(), 1e-3 * largest), 1e-4)
        << e.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, RefModelGolden,
                         ::testing::Values("distilbert-tiny", "bert-tiny", "bert-tokcls-tiny",
                                           "roberta-tokcls-tiny"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// A tiny random model of `family` with `head`: 2 layers, 2 heads of 3 channels, 3 labels.
ModelState tiny_model(const ModelFamily& family, HeadKind head) {
  ModelConfig c = ModelConfig::defaults(family);
  c.vocab_size = 20;
  c.hidden = 6;
  c.heads = 2;
  c.intermediate = 7;
  c.layers = 2;
  c.max_positions = 10;
  c.pad_token_id = std::min(c.pad_token_id, c.vocab_size - 1);  // ModernBERT's is 50283
  if (c.rotary.enabled) c.rotary.window = 2;  // a local layer whose window matters at T = 5
  if (c.embedding > 0) c.embedding = 4;       // ELECTRA: projected from 4 to 6 channels
  c.num_labels = 3;
  c.id2label = {"A", "B", "C"};
  c.head = head;
  c.initializer_range = 0.5;  // large enough for every term to matter
  ModelState s(c);
  init_params(s.layout, s.config, 7, s.params.data());
  for (std::int64_t i = 0; i < s.layout.total(); ++i)  // LayerNorms and biases off their init
    s.params.data()[i] += static_cast<float>(0.1 * std::sin(1.0 + static_cast<double>(i)));
  return s;
}

class RefModelGradients
    : public ::testing::TestWithParam<std::tuple<const ModelFamily*, HeadKind>> {};

TEST_P(RefModelGradients, MatchFiniteDifferences) {
  const auto [family, head] = GetParam();
  const ModelState s = tiny_model(*family, head);
  const std::int32_t pad = s.config.pad_token_id;
  ref::ModelBatch in;
  in.B = 2, in.T = 5;
  // Row 0: five tokens; row 1: three, then padding. No real token is the padding id.
  in.input_ids = {3, 7, 12, 5, 9, 4, 15, 8, pad, pad};
  for (int p = 0; p < 8; ++p)
    if (in.input_ids[p] == pad) in.input_ids[p] = 11;
  in.attention_mask = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
  in.token_type_ids = {0, 0, 0, 1, 1, 0, 1, 1, 0, 0};
  if (s.config.type_vocab_size < 2) in.token_type_ids.assign(10, 0);  // RoBERTa's single type
  in.labels = head == HeadKind::kTokenClassification
                  ? std::vector<double>{-100, 2, 0, -100, 1, -100, 1, 2, -100, -100}
                  : std::vector<double>{2, 0};
  std::vector<double> params(s.params.data(), s.params.data() + s.layout.total());
  const ref::ModelResult r = ref::model_forward_backward(s.config, s.layout, params, in);
  ASSERT_EQ(r.grads.size(), params.size());
  std::vector<double> fd(params.size());
  const double h = 1e-5;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const double p = params[i];
    params[i] = p + h;
    const double up = ref::model_forward_backward(s.config, s.layout, params, in).loss;
    params[i] = p - h;
    const double down = ref::model_forward_backward(s.config, s.layout, params, in).loss;
    params[i] = p;
    fd[i] = (up - down) / (2 * h);
  }
  double largest = 0;
  for (const ParamEntry& e : s.layout.entries())
    largest = std::max(largest, testing::l2(fd.data() + e.offset, e.size));
  ASSERT_GT(largest, 0);
  for (const ParamEntry& e : s.layout.entries()) {
    EXPECT_LT(rel_err(r.grads.data() + e.offset, fd.data() + e.offset,
                      static_cast<std::size_t>(e.size), 1e-3 * largest),
              1e-6)
        << e.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, RefModelGradients,
                         ::testing::Combine(::testing::ValuesIn(model_families()),
                                            ::testing::Values(HeadKind::kSequenceClassification,
                                                              HeadKind::kTokenClassification)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param)->model_type;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n + (std::get<1>(info.param) == HeadKind::kTokenClassification
                                           ? "_token"
                                           : "_sequence");
                         });

}  // namespace
}  // namespace bertfit
