// Sentence-embedding training through the binary against sentence-transformers 2.2.2
// (../shared/golden/st-bert-mean-tiny and tests/fixtures/st, README there):
//  * the loss and every gradient of MultipleNegativesRankingLoss (mean pooling + Normalize on
//    BERT; CLS + max pooling without Normalize on XLM-R; a Dense module between mean pooling and
//    Normalize, its weight and bias included; hard negatives as a third column),
//    CosineSimilarityLoss and CoSENT, through `forward --grads` with a "pair_loss" batch;
//  * the 4-step AdamW trajectory of fit() through `train` (per-step losses, final parameters),
//    and the trained folder being a sentence-transformers folder that `embed` runs;
//  * the flags of embedding training and their errors; STS-B: the dev Spearman after CoSENT
//    training on the train pairs is above the untrained model's.
// Tolerances as tests/cli/forward_cli_test.cc argues them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "tests/util/compare.h"

namespace bertfit::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string fixtures() { return std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/st"; }
std::string st_bert() { return shared_dir() + "/golden/st-bert-mean-tiny"; }

json read_json(const std::string& path) { return json::parse(read_text(path)); }

// Column `key` of a JSON object of lists, or of a JSONL file's rows.
std::vector<std::string> column(const std::string& path, const std::string& key) {
  std::vector<std::string> out;
  if (path.ends_with(".jsonl")) {
    std::istringstream in(read_text(path));
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) out.push_back(json::parse(line)[key].get<std::string>());
    }
    return out;
  }
  const json all = read_json(path);
  for (const auto& t : all[key]) out.push_back(t.get<std::string>());
  return out;
}

// A forward batch of the texts (k columns one after the other), tokenized by the model's
// tokenizer (64 tokens, as the fixtures' max_seq_length), padded.
std::string make_batch(const TempDir& tmp, const std::string& model,
                       const std::vector<std::string>& texts, const json& pair_loss) {
  std::string lines;
  for (const std::string& t : texts) lines += json{{"text", t}}.dump() + "\n";
  write_text(tmp / "texts.jsonl", lines);
  RunResult r = run_bertfit("tokenize --model " + model + " --input " + (tmp / "texts.jsonl") +
                            " --text-a-column text --max-seq-len 64");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::vector<int>> ids;
  std::istringstream in(r.out);
  std::size_t T = 0;
  for (std::string line; std::getline(in, line);) {
    ids.push_back(json::parse(line)["input_ids"].get<std::vector<int>>());
    T = std::max(T, ids.back().size());
  }
  json batch{{"input_ids", json::array()}, {"attention_mask", json::array()}};
  for (auto& row : ids) {
    std::vector<int> mask(row.size(), 1);
    mask.resize(T, 0);
    row.resize(T, 0);
    batch["input_ids"].push_back(row);
    batch["attention_mask"].push_back(mask);
  }
  batch["pair_loss"] = pair_loss;
  write_text(tmp / "batch.json", batch.dump());
  return tmp / "batch.json";
}

std::vector<std::int64_t> int_rows(const SafetensorsFile& f, const std::string& name) {
  for (const TensorInfo& t : f.tensors()) {
    if (t.name != name) continue;
    std::vector<std::int64_t> out(t.shape.numel());
    std::memcpy(out.data(), f.bytes(t).data(), out.size() * sizeof(std::int64_t));
    return out;
  }
  return {};
}

// Our tensor `v` on the rows the golden file stores of `base` (rows.<base>; all of it when the
// golden tensor is whole), `stored` values in all.
std::vector<float> golden_rows_of(const std::vector<float>& v, const SafetensorsFile& golden,
                                  const std::string& base, std::size_t stored) {
  const std::vector<std::int64_t> rows = int_rows(golden, "rows." + base);
  if (rows.empty()) return v;
  const std::size_t width = stored / rows.size();
  std::vector<float> got;
  for (std::int64_t r : rows)
    got.insert(got.end(), v.begin() + r * width, v.begin() + (r + 1) * width);
  return got;
}

// The golden name of our tensor: its base-model name (without the family's prefix, e.g. bert.);
// a Dense module's tensors keep their module folder ("2_Dense.linear.weight").
std::string golden_base(const std::string& name) {
  // A Dense module's own names; base-model names (embeddings.*, encoder.*, pooler.*) as they
  // are; else without the family's prefix ("bert.").
  if (name.find("_Dense.") != std::string::npos) return name;
  for (const char* base : {"embeddings.", "encoder.", "pooler."}) {
    if (name.starts_with(base)) return name;
  }
  return name.substr(name.find('.') + 1);
}

// Our tensor `name` against golden `prefix` + golden_base(name); a golden tensor stored for some
// rows only (rows.<name>) is compared on those rows.
void expect_tensors(const std::map<std::string, std::vector<float>>& ours,
                    const SafetensorsFile& golden, const std::string& prefix, double tol) {
  double largest = 0;
  for (const auto& [name, v] : ours) largest = std::max(largest, l2(v.data(), v.size()));
  int compared = 0;
  for (const auto& [name, v] : ours) {
    const std::string base = golden_base(name);
    const std::vector<float> want = read_tensor(golden, prefix + base);
    const std::vector<float> got = golden_rows_of(v, golden, base, want.size());
    ASSERT_EQ(got.size(), want.size()) << name;
    EXPECT_LE(rel_err(got, want, 1e-3 * largest), tol) << name;
    ++compared;
  }
  EXPECT_GT(compared, 30);
}

// The floating tensors of a torch.save file, read by bertfit's PyTorch reader.
std::map<std::string, std::vector<float>> pytorch_tensors(const std::string& path) {
  const Checkpoint c = Checkpoint::open(path, CheckpointFormat::kPytorch);
  std::map<std::string, std::vector<float>> out;
  for (const CheckpointTensor& t : c.tensors()) {
    if (!is_floating(t.dtype)) continue;  // buffers such as position_ids
    std::vector<float>& v = out[t.name];
    v.resize(t.shape.numel());
    read_f32(t, v.data());
  }
  return out;
}

struct GradCase {
  const char* name;
  std::string model, data;
  std::vector<std::string> columns;
  json pair_loss;
  std::string golden, loss_key, grad_prefix;
};

class EmbeddingGradients : public ::testing::TestWithParam<int> {};

std::vector<GradCase> grad_cases() {
  const std::string fx = fixtures();
  const std::string cosine = fx + "/st-bert-cosine/pairs.jsonl";
  std::vector<float> labels;
  {
    std::istringstream in(read_text(cosine));
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) labels.push_back(json::parse(line)["label"].get<float>());
    }
  }
  return {
      {"bert-mean-normalize-mnrl",
       st_bert() + "/model",
       st_bert() + "/pairs.json",
       {"anchor", "positive"},
       {{"loss", "mnrl"}, {"columns", 2}, {"scale", 20}},
       st_bert() + "/golden.safetensors",
       "train.loss",
       "grad."},
      {"xlmr-cls-max-mnrl",
       fx + "/xlmr-cls-max-tiny/model",
       fx + "/xlmr-cls-max-tiny/pairs.json",
       {"anchor", "positive"},
       {{"loss", "mnrl"}, {"columns", 2}, {"scale", 20}},
       fx + "/xlmr-cls-max-tiny/golden.safetensors",
       "train.loss",
       "grad."},
      {"bert-hard-negatives",
       st_bert() + "/model",
       fx + "/st-bert-hardneg/triplets.json",
       {"anchor", "positive", "negative"},
       {{"loss", "mnrl"}, {"columns", 3}, {"scale", 20}},
       fx + "/st-bert-hardneg/golden.safetensors",
       "train.loss",
       "grad."},
      {"bert-dense-mnrl",
       fx + "/st-bert-dense/model",
       fx + "/st-bert-dense/pairs.json",
       {"anchor", "positive"},
       {{"loss", "mnrl"}, {"columns", 2}, {"scale", 20}},
       fx + "/st-bert-dense/golden.safetensors",
       "train.loss",
       "grad."},
      {"bert-cosine",
       st_bert() + "/model",
       cosine,
       {"sentence1", "sentence2"},
       {{"loss", "cosine"}, {"columns", 2}, {"scores", labels}},
       fx + "/st-bert-cosine/golden.safetensors",
       "cosine.loss",
       "cosine.grad."},
      {"bert-cosent",
       st_bert() + "/model",
       cosine,
       {"sentence1", "sentence2"},
       {{"loss", "cosent"}, {"columns", 2}, {"scale", 20}, {"scores", labels}},
       fx + "/st-bert-cosine/golden.safetensors",
       "cosent.loss",
       "cosent.grad."},
  };
}

TEST_P(EmbeddingGradients, LossAndEveryGradientMatchSentenceTransformers) {
  const GradCase c = grad_cases()[GetParam()];
  SCOPED_TRACE(c.name);
  TempDir tmp;
  std::vector<std::string> texts;
  for (const std::string& col : c.columns) {
    for (std::string& t : column(c.data, col)) texts.push_back(std::move(t));
  }
  const std::string batch = make_batch(tmp, c.model, texts, c.pair_loss);
  RunResult r = run_bertfit("forward --model " + c.model + " --batch " + batch + " --grads " +
                            (tmp / "g.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  SafetensorsFile golden = SafetensorsFile::open(c.golden);
  const double want = read_tensor(golden, c.loss_key)[0];
  EXPECT_NEAR(json::parse(r.out)["loss"].get<double>(), want, 1e-5 * (1 + std::fabs(want)));
  const auto grads = tensors_of(tmp / "g.safetensors");
  expect_tensors(grads, golden, c.grad_prefix, 1e-4);
  if (c.model.find("st-bert-dense") != std::string::npos) {  // compared above, so present
    ASSERT_EQ(grads.count("2_Dense.linear.weight"), 1u);
    EXPECT_EQ(grads.at("2_Dense.linear.weight").size(), 8u * 16u);
    EXPECT_EQ(grads.count("2_Dense.linear.bias"), 1u);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EmbeddingGradients, ::testing::Range(0, 6));

// The model folder with dropout off (the fixtures' trajectories ran without), symlinks resolved.
std::string without_dropout(const std::string& model, const std::string& to) {
  fs::copy(model, to, fs::copy_options::recursive);
  json config = read_json(to + "/config.json");
  config["hidden_dropout_prob"] = 0.0;
  config["attention_probs_dropout_prob"] = 0.0;
  write_text(to + "/config.json", config.dump(2));
  return to;
}

void write_pairs(const std::string& from, const std::string& to) {
  const std::vector<std::string> a = column(from, "anchor"), p = column(from, "positive");
  std::string lines;
  for (std::size_t i = 0; i < a.size(); ++i) {
    lines += json{{"anchor", a[i]}, {"positive", p[i]}}.dump() + "\n";
  }
  write_text(to, lines);
}

class EmbeddingTrajectory : public ::testing::TestWithParam<std::string> {};

// fit(): 4 steps of 4 pairs, pairs [(4s) mod 8, +4) at step s (file order), lr 1e-3 with one
// warmup step, weight decay 0.01, clipping at 1.
TEST_P(EmbeddingTrajectory, LossesAndFinalParametersMatchFit) {
  const std::string dir =
      GetParam() == "st-bert-mean-tiny" ? st_bert() : fixtures() + "/" + GetParam();
  TempDir tmp;
  const std::string model = without_dropout(dir + "/model", tmp / "model");
  write_pairs(dir + "/pairs.json", tmp / "pairs.jsonl");
  RunResult r =
      run_bertfit("train --model " + model + " --train-file " + (tmp / "pairs.jsonl") +
                  " --text-a-column anchor --text-b-column positive --output " + (tmp / "out") +
                  " --batch-size 4 --max-steps 4 --lr 1e-3 --weight-decay 0.01 --warmup-steps 1"
                  " --max-grad-norm 1 --no-shuffle --log-every 1 --max-seq-len 64");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json t = read_json(dir + "/golden.json")["trajectory"];
  std::vector<double> losses;
  std::istringstream in(read_text(tmp / "out/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const json rec = json::parse(line);
    if (rec.contains("step") && rec.contains("loss")) losses.push_back(rec["loss"].get<double>());
  }
  ASSERT_EQ(losses.size(), t["losses"].size());
  for (std::size_t s = 0; s < losses.size(); ++s) {
    EXPECT_NEAR(losses[s], t["losses"][s].get<double>(), 2e-5) << "step " << s + 1;
  }
  // Final parameters: 2e-3 relative per tensor (the key biases: within 2·Σ lr, their gradient
  // being rounding noise), as tests/cli/cli_util.h's expect_final_parameters argues.
  SafetensorsFile golden = SafetensorsFile::open(dir + "/golden.safetensors");
  int compared = 0;
  auto params = tensors_of(tmp / "out/model.safetensors");
  // A Dense module's trained weights are in its own folder's file.
  const bool dense = fs::exists(dir + "/model/2_Dense");
  if (dense) {
    // pytorch_model.bin, the one file sentence-transformers 2.2.2 loads.
    for (const char* f : {"2_Dense/config.json", "2_Dense/pytorch_model.bin"}) {
      ASSERT_TRUE(fs::exists(tmp / "out" + "/" + f)) << f;
    }
    EXPECT_EQ(read_json(tmp / "out/2_Dense/config.json"),
              read_json(dir + "/model/2_Dense/config.json"));
    EXPECT_FALSE(fs::exists(tmp / "out/2_Dense/model.safetensors"));
    const auto dense_file = pytorch_tensors(tmp / "out/2_Dense/pytorch_model.bin");
    ASSERT_EQ(dense_file.size(), 2u);
    for (const auto& [name, v] : dense_file) params["2_Dense." + name] = v;
    EXPECT_EQ(params.count("2_Dense.linear.weight"), 1u);
  }
  // The source's tensors that an embedder does not use (BERT's pooler, a classifier head the
  // source held) are kept as they were, bit for bit; the others trained as fit() trains them.
  const std::string source = dir + "/model";
  const auto source_tensors = fs::exists(source + "/pytorch_model.bin")
                                  ? pytorch_tensors(source + "/pytorch_model.bin")
                                  : tensors_of(source + "/model.safetensors");
  for (const auto& [name, v] : params) {
    if (name.starts_with("pooler.") || name.find("classifier.") != std::string::npos) {
      ASSERT_EQ(source_tensors.count(name), 1u) << name;
      EXPECT_EQ(v, source_tensors.at(name)) << name;
      continue;
    }
    const std::string base = golden_base(name);
    const std::vector<float> want = read_tensor(golden, "final." + base);
    const std::vector<float> got = golden_rows_of(v, golden, base, want.size());
    ASSERT_EQ(got.size(), want.size()) << name;
    if (base.ends_with("attention.self.key.bias")) {
      for (std::size_t i = 0; i < got.size(); ++i)
        EXPECT_LE(std::fabs(got[i] - want[i]), 4e-3) << name;
    } else {
      EXPECT_LT(rel_err(got, want), 2e-3) << name;
    }
    ++compared;
  }
  EXPECT_GT(compared, 30);
  // Every tensor of the source's weights under its own name, none added (issue 46): the
  // pooler and integer buffers (position_ids) too, so the folder round-trips.
  auto names_of = [](const std::string& folder) {
    const bool bin = fs::exists(folder + "/pytorch_model.bin");
    const Checkpoint c =
        Checkpoint::open(folder + (bin ? "/pytorch_model.bin" : "/model.safetensors"),
                         bin ? CheckpointFormat::kPytorch : CheckpointFormat::kSafetensors);
    std::vector<std::string> names;
    for (const auto& t : c.tensors()) names.push_back(t.name + " " + t.shape.str());
    std::sort(names.begin(), names.end());
    return names;
  };
  EXPECT_EQ(names_of(tmp / "out"), names_of(dir + "/model"));
  // A sentence-transformers folder with the source's modules, which embed runs.
  for (const char* f : {"modules.json", "1_Pooling/config.json", "sentence_bert_config.json",
                        "config_sentence_transformers.json"}) {
    EXPECT_TRUE(fs::exists(tmp / "out" + "/" + f)) << f;
  }
  EXPECT_EQ(read_json(tmp / "out/1_Pooling/config.json"),
            read_json(dir + "/model/1_Pooling/config.json"));
  EXPECT_EQ(read_json(tmp / "out/modules.json"), read_json(dir + "/model/modules.json"));
  RunResult e = run_bertfit("embed --model " + (tmp / "out") + " --input " + (tmp / "pairs.jsonl") +
                            " --text-a-column anchor");
  EXPECT_EQ(e.exit_code, 0) << e.err;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EmbeddingTrajectory,
                         ::testing::Values("st-bert-mean-tiny", "xlmr-cls-max-tiny",
                                           "st-bert-dense"));

class EmbeddingFlags : public ::testing::Test {
 protected:
  void SetUp() override {
    write_pairs(st_bert() + "/pairs.json", tmp_ / "pairs.jsonl");
    RunResult r = run_bertfit(
        "init --arch bert --set num_hidden_layers=1 --set hidden_size=24"
        " --set num_attention_heads=2 --set intermediate_size=40 --seed 3 --output " +
        (tmp_ / "plain"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  std::string train(const std::string& model, const std::string& out, const std::string& extra,
                    int steps = 2) {
    return "train --model " + model + " --output " + (tmp_ / out) + " --train-file " +
           (tmp_ / "pairs.jsonl") +
           " --text-a-column anchor --text-b-column positive --max-steps " + std::to_string(steps) +
           " --batch-size 4 " + extra;
  }
  TempDir tmp_;
};

// --objective embedding with --pooling on a plain encoder: a sentence-transformers folder with
// that pooling and no Normalize, whose embeddings `embed` gives (and --loss-scale changes the
// loss).
TEST_F(EmbeddingFlags, PlainEncoderWithPoolingBecomesASentenceTransformer) {
  RunResult r = run_bertfit(train(tmp_ / "plain", "cls", "--objective embedding --pooling cls"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json pooling = read_json(tmp_ / "cls/1_Pooling/config.json");
  EXPECT_TRUE(pooling["pooling_mode_cls_token"].get<bool>());
  EXPECT_FALSE(pooling["pooling_mode_mean_tokens"].get<bool>());
  EXPECT_EQ(pooling["word_embedding_dimension"], 24);
  EXPECT_FALSE(fs::exists(tmp_ / "cls/2_Normalize"));
  EXPECT_EQ(read_json(tmp_ / "cls/sentence_bert_config.json")["max_seq_length"], 128);
  RunResult e = run_bertfit("embed --model " + (tmp_ / "cls") + " --input " +
                            (tmp_ / "pairs.jsonl") + " --text-a-column anchor");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_EQ(json::parse(last_line(e.out))["embedding"].size(), 24u);
  // The default pooling is mean; the loss scale reaches the loss.
  RunResult mean = run_bertfit(train(tmp_ / "plain", "mean", "--objective embedding"));
  ASSERT_EQ(mean.exit_code, 0) << mean.err;
  EXPECT_TRUE(
      read_json(tmp_ / "mean/1_Pooling/config.json")["pooling_mode_mean_tokens"].get<bool>());
  RunResult scaled =
      run_bertfit(train(tmp_ / "plain", "scaled", "--objective embedding --loss-scale 5"));
  ASSERT_EQ(scaled.exit_code, 0) << scaled.err;
  const auto first_loss = [&](const std::string& out) {
    std::istringstream in(read_text(tmp_ / out + "/metrics.jsonl"));
    std::string line;
    std::getline(in, line);
    return json::parse(line)["loss"].get<double>();
  };
  EXPECT_GT(std::fabs(first_loss("mean") - first_loss("scaled")), 1e-3);
  // Resuming a --pooling run finds its own modules in the checkpoint.
  RunResult more = run_bertfit(train(
      tmp_ / "plain", "mean", "--objective embedding --resume " + (tmp_ / "mean/checkpoint"), 3));
  EXPECT_EQ(more.exit_code, 0) << more.err;
}

// A run resumed from its step-2 checkpoint ends with the uninterrupted run's parameters, bit for
// bit (the sample stream, the dropout masks, AdamW's moments and the sentence-transformers files
// all come back from the checkpoint).
TEST_F(EmbeddingFlags, ResumeIsExact) {
  const std::string st = st_bert() + "/model";
  RunResult whole =
      run_bertfit(train(st, "whole", "--lr 1e-3 --save-every 2 --save-total-limit 0", 4));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  fs::copy(tmp_ / "whole/checkpoint-2", tmp_ / "at2", fs::copy_options::recursive);
  RunResult resumed = run_bertfit(train(st, "resumed", "--lr 1e-3 --resume " + (tmp_ / "at2"), 4));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(read_text(tmp_ / "whole/model.safetensors"),
            read_text(tmp_ / "resumed/model.safetensors"));
  EXPECT_EQ(read_text(tmp_ / "whole/modules.json"), read_text(tmp_ / "resumed/modules.json"));
}

// Hard negatives: one more column per --negative-columns entry (here the positive again, which
// makes each anchor's positive appear twice: the loss rises by about log 2 over the plain one).
TEST_F(EmbeddingFlags, NegativeColumnsAddCandidates) {
  std::string lines;
  const std::vector<std::string> a = column(st_bert() + "/pairs.json", "anchor"),
                                 p = column(st_bert() + "/pairs.json", "positive");
  for (std::size_t i = 0; i < a.size(); ++i) {
    lines += json{{"anchor", a[i]}, {"positive", p[i]}, {"neg", p[i]}}.dump() + "\n";
  }
  write_text(tmp_ / "triplets.jsonl", lines);
  const std::string base = "train --model " + st_bert() + "/model --train-file " +
                           (tmp_ / "triplets.jsonl") +
                           " --text-a-column anchor --text-b-column positive --max-steps 1 "
                           "--batch-size 8 --lr 0 --output ";
  RunResult plain = run_bertfit(base + (tmp_ / "plain-run"));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  // Without --max-seq-len the folder's max_seq_length cuts the texts, as fit() does.
  EXPECT_NE(plain.err.find("texts are cut at 64 tokens"), std::string::npos) << plain.err;
  RunResult hard = run_bertfit(base + (tmp_ / "hard-run") + " --negative-columns neg");
  ASSERT_EQ(hard.exit_code, 0) << hard.err;
  auto loss = [&](const std::string& out) {
    return json::parse(last_line(read_text(tmp_ / out + "/metrics.jsonl")))["loss"].get<double>();
  };
  EXPECT_GT(loss("hard-run"), loss("plain-run") + 0.3);
}

TEST_F(EmbeddingFlags, UserErrorsNameTheFlag) {
  const std::string st = st_bert() + "/model";
  const struct {
    std::string args, message;
  } cases[] = {
      {train(st, "e1", "--pooling cls"), "--pooling cls: "},
      {train(st, "e2", "--loss cosent"), "--loss cosent needs scored pairs: give --label-column"},
      {train(st, "e3", "--num-labels 2"), "--num-labels is for training a classifier"},
      {train(st, "e4", "--label-smoothing-factor 0.1"), "--label-smoothing-factor is for"},
      {train(st, "e5", "--loss-scale 0"), "--loss-scale 0: must be a positive number"},
      {train(st, "e6", "--negative-columns nope"), "nope"},
      {"train --model " + st + " --output " + (tmp_ / "e7") + " --task stsb --data " +
           shared_dir() + "/data/glue/STS-B",
       "--task stsb: a sentence-embedding model trains on the rows of --train-file"},
      {"train --model " + st + " --output " + (tmp_ / "e8") + " --train-file " +
           (tmp_ / "pairs.jsonl") + " --text-a-column anchor --max-steps 1",
       "need --text-a-column (the anchor or first text) and --text-b-column"},
      {train(st, "e9", "--loss cosine --label-column anchor"), "is not a finite number"},
      {train(st, "e10", "--dev-file " + (tmp_ / "pairs.jsonl")),
       "--dev-file: the similarity evaluation reads scored pairs"},
  };
  for (const auto& c : cases) {
    RunResult r = run_bertfit(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
  }
  // --objective classification trains a classifier from a sentence-transformers folder: a
  // label column is then needed, as for any classifier.
  RunResult cls = run_bertfit(train(st, "c1", "--objective classification"));
  EXPECT_NE(cls.exit_code, 0);
  EXPECT_NE(cls.err.find("--label-column"), std::string::npos) << cls.err;
}

// STS-B: CoSENT on 2000 scored train pairs lifts the dev Spearman (500 pairs, evaluated during
// train and by `eval`) above the untrained model's, the run's best checkpoint chosen by it.
TEST_F(EmbeddingFlags, CoSENTOnStsbImprovesTheDevSpearman) {
  const std::string sts = shared_dir() + "/data/glue/STS-B";
  std::string train_rows, dev_rows;
  {
    std::istringstream in(read_text(sts + "/train.tsv"));
    std::string line;
    for (int i = 0; std::getline(in, line) && i <= 2000; ++i) train_rows += line + "\n";
    std::istringstream dev(read_text(sts + "/dev.tsv"));
    for (int i = 0; std::getline(dev, line) && i <= 500; ++i) dev_rows += line + "\n";
  }
  write_text(tmp_ / "train.tsv", train_rows);
  write_text(tmp_ / "dev.tsv", dev_rows);
  const std::string columns =
      " --text-a-column sentence1 --text-b-column sentence2 --label-column score";
  const std::string model = without_dropout(st_bert() + "/model", tmp_ / "st");
  RunResult before = run_bertfit("eval --model " + model + " --dev-file " + (tmp_ / "dev.tsv") +
                                 columns + " --max-seq-len 64");
  ASSERT_EQ(before.exit_code, 0) << before.err;
  RunResult r =
      run_bertfit("train --model " + model + " --output " + (tmp_ / "sts") + " --train-file " +
                  (tmp_ / "train.tsv") + " --dev-file " + (tmp_ / "dev.tsv") + columns +
                  " --epochs 2 --batch-size 32 --lr 1e-3 --warmup-ratio 0.1"
                  " --max-seq-len 64 --eval-every epoch");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  RunResult after = run_bertfit("eval --model " + (tmp_ / "sts") + " --dev-file " +
                                (tmp_ / "dev.tsv") + columns + " --max-seq-len 64");
  ASSERT_EQ(after.exit_code, 0) << after.err;
  const double s0 = json::parse(before.out)["eval_spearman_cosine"].get<double>();
  const double s1 = json::parse(after.out)["eval_spearman_cosine"].get<double>();
  EXPECT_EQ(json::parse(after.out)["examples"], 500);
  EXPECT_FALSE(json::parse(after.out).contains("eval_loss"));
  EXPECT_GT(s1, s0 + 0.2) << before.out << "\n" << after.out;
  // train's own evaluation of the final model agrees with eval's.
  const json final_rec = json::parse(last_line(read_text(tmp_ / "sts/metrics.jsonl")));
  EXPECT_NEAR(final_rec["eval_spearman_cosine"].get<double>(), s1, 1e-6);
  EXPECT_EQ(final_rec["best_metric"], "eval_spearman_cosine");
}

}  // namespace
}  // namespace bertfit::testing
