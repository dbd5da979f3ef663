// `bertfit forward` through the binary against reference numbers: the golden files of Hugging
// Face transformers (../shared/golden) in eval mode with --grads (this path once crashed: the
// eval forward kept no backward state), and the PyTorch peer's logits, loss and every gradient
// for the three problem types (fixtures in tests/cli/fixtures, made by make_peer_fixtures.sh).
//
// Tolerances as tests/golden/golden_test.cc argues them: fp32 computations of one formula in
// different orders over reductions of at most a few hundred terms give relative errors of a few
// 1e-6; 1e-4 relative L2 per tensor is far above that and far below any wrong formula.
// Gradients are compared against max(‖ref‖, 1e-3 · the largest gradient norm), since the key
// biases' true gradient is exactly zero and their reference values are rounding noise.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"
#include "io/safetensors.h"
#include "tests/util/compare.h"

namespace bertfit::testing {
namespace {

using Grads = std::vector<std::pair<std::string, std::vector<float>>>;

// Runs forward --grads (eval mode unless train_mode) and returns its JSON and gradients.
struct ForwardRun {
  nlohmann::json out;
  Grads grads;
};
ForwardRun run_forward(const std::string& model, const std::string& batch, bool train_mode) {
  TempDir tmp;
  RunResult r = run_bertfit("forward --model " + model + " --batch " + batch + " --grads " +
                            (tmp / "g.safetensors") + (train_mode ? " --train-mode" : ""));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ForwardRun run;
  if (r.exit_code != 0) return run;
  run.out = nlohmann::json::parse(r.out);
  SafetensorsFile f = SafetensorsFile::open(tmp / "g.safetensors");
  for (const TensorInfo& t : f.tensors()) run.grads.emplace_back(t.name, read_tensor(f, t.name));
  return run;
}

double largest_norm(const Grads& grads) {
  double largest = 0;
  for (const auto& [name, g] : grads) largest = std::max(largest, l2(g.data(), g.size()));
  return largest;
}

class ForwardGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(ForwardGolden, EvalModeGradientsMatchTransformers) {
  const std::string dir = shared_dir() + "/golden/" + GetParam();
  ForwardRun run = run_forward(dir + "/model", dir + "/batch.json", /*train_mode=*/false);
  ASSERT_FALSE(run.grads.empty());
  SafetensorsFile golden = SafetensorsFile::open(dir + "/golden.safetensors");
  const std::vector<double> logits = flat_json(run.out["logits"]);
  const std::vector<float> want_logits = read_tensor(golden, "eval.logits");
  EXPECT_LT(rel_err(logits, want_logits), 1e-4);
  ASSERT_EQ(logits.size(), want_logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i)  // and within 1e-6 of each, absolutely
    EXPECT_NEAR(logits[i], want_logits[i], 1e-6) << "logit " << i;
  const float want_loss = read_tensor(golden, "train.loss")[0];  // dropout 0: the eval-mode loss
  EXPECT_NEAR(run.out["loss"].get<double>(), want_loss, 1e-5 * std::fabs(want_loss));
  Grads want;
  for (const auto& [name, g] : run.grads)
    want.emplace_back(name, read_tensor(golden, "grad." + name));
  const double floor = 1e-3 * largest_norm(want);
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_LT(rel_err(run.grads[i].second, want[i].second, floor), 1e-4) << want[i].first;
}

INSTANTIATE_TEST_SUITE_P(Models, ForwardGolden,
                         ::testing::Values("distilbert-tiny", "bert-tiny", "roberta-tiny",
                                           "xlmr-tiny", "electra-tiny"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// The golden token classifiers (BertForTokenClassification, RobertaForTokenClassification) with
// the architectures save_pretrained writes: a row of logits per token (the real tokens'
// compared: unpadded execution leaves padding rows 0), the loss over the labelled tokens and
// every gradient, as transformers computes them.
TEST(ForwardGoldenTokens, TokenClassifiersMatchTransformers) {
  for (const std::string model : {"bert-tokcls-tiny", "roberta-tokcls-tiny"}) {
    SCOPED_TRACE(model);
    TempDir tmp;
    const std::string dir = shared_dir() + "/golden/" + model, copy = tmp / "m";
    std::filesystem::copy(dir + "/model", copy);
    nlohmann::json config = nlohmann::json::parse(read_text(copy + "/config.json"));
    config["architectures"] = {model == "bert-tokcls-tiny" ? "BertForTokenClassification"
                                                           : "RobertaForTokenClassification"};
    write_text(copy + "/config.json", config.dump(2));
    ForwardRun run = run_forward(copy, dir + "/batch.json", /*train_mode=*/false);
    ASSERT_FALSE(run.grads.empty());
    SafetensorsFile golden = SafetensorsFile::open(dir + "/golden.safetensors");
    const nlohmann::json batch = nlohmann::json::parse(read_text(dir + "/batch.json"));
    const std::vector<float> want = read_tensor(golden, "eval.logits");
    std::vector<float> got_real, want_real;
    std::size_t at = 0;
    for (std::size_t b = 0; b < batch["input_ids"].size(); ++b) {
      for (std::size_t t = 0; t < batch["input_ids"][b].size(); ++t) {
        const nlohmann::json& row = run.out["logits"][b][t];
        if (batch["attention_mask"][b][t] == 1) {
          for (const auto& v : row) got_real.push_back(v.get<float>());
          want_real.insert(want_real.end(), want.begin() + at, want.begin() + at + row.size());
        }
        at += row.size();
      }
    }
    ASSERT_EQ(at, want.size());
    EXPECT_LT(rel_err(got_real, want_real), 1e-4);
    const float want_loss = read_tensor(golden, "train.loss")[0];
    EXPECT_NEAR(run.out["loss"].get<double>(), want_loss, 1e-5 * std::fabs(want_loss));
    Grads want_grads;
    for (const auto& [name, g] : run.grads)
      want_grads.emplace_back(name, read_tensor(golden, "grad." + name));
    const double floor = 1e-3 * largest_norm(want_grads);
    for (std::size_t i = 0; i < want_grads.size(); ++i) {
      EXPECT_LT(rel_err(run.grads[i].second, want_grads[i].second, floor), 1e-4)
          << want_grads[i].first;
    }
  }
}

// Fixtures made by the PyTorch peer (torch_peer.py forward, transformers' loss for each
// problem type) on small models with awkward sizes.
class ForwardPeer : public ::testing::TestWithParam<std::string> {};

TEST_P(ForwardPeer, LogitsLossAndEveryGradientMatchThePeer) {
  const std::string dir = std::string(BERTFIT_SOURCE_DIR) + "/tests/cli/fixtures/" + GetParam();
  const nlohmann::json want = nlohmann::json::parse(read_text(dir + "/peer.json"));
  for (bool train_mode : {false, true}) {  // the fixtures' dropout is 0: both modes agree
    ForwardRun run = run_forward(dir + "/model", dir + "/batch.json", train_mode);
    ASSERT_FALSE(run.grads.empty());
    EXPECT_LT(rel_err(flat_json(run.out["logits"]), flat_json(want["logits"])), 1e-4);
    const double want_loss = want["loss"].get<double>();
    EXPECT_NEAR(run.out["loss"].get<double>(), want_loss, 1e-5 * std::fabs(want_loss));
    Grads ref;
    for (const auto& [name, g] : run.grads) {
      ASSERT_TRUE(want["grads"].contains(name)) << name;
      std::vector<double> r = flat_json(want["grads"][name]);
      ref.emplace_back(name, std::vector<float>(r.begin(), r.end()));
    }
    const double floor = 1e-3 * largest_norm(ref);
    for (std::size_t i = 0; i < ref.size(); ++i)
      EXPECT_LT(rel_err(run.grads[i].second, ref[i].second, floor), 1e-4) << ref[i].first;
  }
}

INSTANTIATE_TEST_SUITE_P(ProblemTypes, ForwardPeer,
                         ::testing::Values("regression", "single_label", "multi_label"));

}  // namespace
}  // namespace bertfit::testing
