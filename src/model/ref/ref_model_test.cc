// The reference model is itself checked against Hugging Face's numbers before it judges
// anything: eval logits, the loss and every gradient of the golden models (dropout 0), at the
// golden tests' tolerance (tests/golden/golden_test.cc argues 1e-4 relative L2 per tensor for
// fp32 against double; the reference is double, so its own error is negligible).
#include "model/ref/ref_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/file.h"
#include "io/safetensors.h"
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
  ModelState state = load_model(dir + "/model");
  const nlohmann::json batch = nlohmann::json::parse(read_file(dir + "/batch.json"));
  ref::ModelBatch in;
  in.B = static_cast<int>(batch["input_ids"].size());
  in.T = static_cast<int>(batch["input_ids"][0].size());
  in.input_ids = matrix(batch["input_ids"]);
  in.attention_mask = matrix(batch["attention_mask"]);
  in.token_type_ids = matrix(batch["token_type_ids"]);
  for (const auto& l : batch["labels"]) in.labels.push_back(l.get<double>());
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

INSTANTIATE_TEST_SUITE_P(Models, RefModelGolden, ::testing::Values("distilbert-tiny", "bert-tiny"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace bertfit
