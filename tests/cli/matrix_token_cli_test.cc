// The command matrix's token classifiers (issue 33): every family of matrix_families.cc gets
// kTokenCasesPerFamily models made by `init --task token-classification --labels ...` (the
// family's *ForTokenClassification: logits[t] = Wo · h[t] + bo on every token of the last
// layer), run through the binary and checked against the double-precision reference model
// (model/ref), as matrix_cli_test.cc does for sequence classifiers and with its tolerances
// (argued at its top):
//   - `forward` in eval and train mode, with and without --grads, on a padded batch whose
//     labels are random class ids per token with -100 on [CLS] / <s>, [SEP] / </s>, padding and
//     a quarter of the words (and on every token of a row of [CLS] alone): every real token's
//     logits, the loss (the mean cross-entropy over the labelled positions) and every gradient;
//   - `eval` and `predict` on tagged words (a CoNLL file, or JSONL with integer tags under
//     --tokens-column / --tags-column), each word tokenized alone into one to three sub-tokens
//     (byte-level BPE and SentencePiece: a marked letter, then unmarked ones), its tag on the
//     first: eval's loss, its accuracy against the reference's argmax agreement and, when no
//     word is fragile (below), seqeval's precision, recall and F1 of the reference's argmax
//     tags; predict's words and each word's tag (the argmax at its first token);
//   - one `train` step on those words (AdamW's first step: −lr · sign(g) where g is clear);
//   - int8 inference (forward, eval, predict) of every case.
// Case j of a family: j = 0 fp32, one thread, 130 tokens, CoNLL; j = 1 bf16, two threads, JSONL.
//
// Argmax near ties. A word's predicted tag is the argmax of its first token's K logits z, which
// the binary computes to the forward tolerance tol (1e-4 fp32, 3e-2 bf16, 0.12 int8) relative
// to the logits' norm (at least logit_scale): a row's logits err by up to about
// tol · max(‖z‖, logit_scale(K)) each, so two logits closer than twice that may swap. Such a
// word is fragile: eval's count of correct words and predict's tags may differ from the
// reference's argmax on fragile words only, and seqeval's scores are compared when there is
// none. Measured: bf16 moved a logit of 1.61 by 0.053 (‖z‖ = 2.3, so 0.023 relative) and swapped
// two logits 0.048 apart (xlm_roberta_1), which a margin of tol · logit_scale(K) = 0.016 alone
// called safe. fp32 makes no word fragile, bf16 up to a fifth, int8 up to 85% (where its eval
// loss is the finer check). Every case prints its count.
// Measured to fail: the engine's token loss averaged over every position instead of the
// labelled ones (every forward and int8 case), the head's gradient gathered from the padded rows
// instead of the packed ones (8 of 10 forward cases, every train step), the head's backward
// skipping its dropout (every forward, eval/predict/train case), predict tagging a word by its
// last sub-token (the BPE and SentencePiece cases: WordPiece words here are one token).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "cli_util.h"
#include "data/seqeval.h"
#include "matrix_checks.h"
#include "matrix_families.h"
#include "model/model_io.h"
#include "model/ref/ref_model.h"
#include "tests/util/compare.h"

namespace bertfit::testing {
namespace {

constexpr int kTokenCasesPerFamily = 2;  // the matrix's running time grows with it
constexpr double kIgnored = -100;        // transformers' ignore_index
// The tags, sorted bytewise as run_ner sorts a data set's tags, so that training keeps the
// model's ids; a case of K labels uses the first K.
const std::vector<std::string> kTags = {"B-LOC", "B-PER", "I-LOC", "I-PER", "O"};

struct TokenCase {
  int index = 0;
  const MatrixFamily* family = nullptr;
  MatrixSizes sizes;
  int num_labels = 2;
  std::string activation, precision;
  int threads = 1;
  bool conll = true;      // the data file: CoNLL, else JSONL with integer tags
  ref::ModelBatch batch;  // the forward batch, B rows padded to T, labels (B,T)
  // The data file's sentences: per word its sub-tokens' ids, and its tag id.
  std::vector<std::vector<std::vector<int>>> words;
  std::vector<std::vector<int>> tags;
};

std::string describe(const TokenCase& c) {
  return "token case " + std::to_string(c.index) + ": " + c.family->arch + " " + describe(c.sizes) +
         " K=" + std::to_string(c.num_labels) + " " + c.activation + " " + c.precision +
         " threads=" + std::to_string(c.threads) + " B=" + std::to_string(c.batch.B) +
         " T=" + std::to_string(c.batch.T) + (c.conll ? " conll" : " jsonl");
}

TokenCase make_token_case(int index) {
  std::mt19937 rng(7000 + index);
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
  const int j = index % kTokenCasesPerFamily;
  TokenCase c;
  c.index = index;
  c.family = &matrix_families().at(index / kTokenCasesPerFamily);
  const MatrixVocabulary& v = c.family->vocabulary;
  c.sizes = random_sizes(rng);
  c.num_labels = pick(2, static_cast<int>(kTags.size()));
  c.activation = std::vector<std::string>{"gelu", "gelu_new", "relu"}[pick(0, 2)];
  c.precision = j == 1 ? "bf16" : "fp32";
  c.threads = 1 + j;
  c.conll = j == 0;
  // Forward batch: the first row has no padding, the second (if any) its [CLS] alone.
  ref::ModelBatch& b = c.batch;
  b.B = pick(1, 9);
  b.T = j == 0 ? 130 : pick(3, 130);
  for (int r = 0; r < b.B; ++r) {
    const int len = r == 0 ? b.T : r == 1 ? 1 : pick(1, b.T);
    for (int t = 0; t < b.T; ++t) {
      const bool real = t < len, sep = len >= 2 && t == len - 1;
      b.input_ids.push_back(t == 0 ? v.cls
                            : sep  ? v.sep
                            : real ? pick(v.word_lo, v.word_hi)
                                   : v.pad);
      b.attention_mask.push_back(real ? 1 : 0);
      b.token_type_ids.push_back(c.family->type_vocab_size != 1 && real && t >= (len + 1) / 2);
      const bool labelled = real && t > 0 && !sep && (t == 1 || pick(0, 3) > 0);
      b.labels.push_back(labelled ? pick(0, c.num_labels - 1) : kIgnored);
    }
  }
  // Data sentences of 1–12 words (the first of j = 0: 40), each of one to three sub-tokens.
  const int sentences = pick(3, 9);
  for (int s = 0; s < sentences; ++s) {
    const int n = j == 0 && s == 0 ? 40 : pick(1, 12);
    std::vector<std::vector<int>> words;
    std::vector<int> tags;
    for (int w = 0; w < n; ++w) {
      std::vector<int> ids = {pick(v.split_lo, v.split_hi)};
      const int more = v.piece_lo <= v.piece_hi ? pick(0, 2) : 0;
      for (int k = 0; k < more; ++k) ids.push_back(pick(v.piece_lo, v.piece_hi));
      words.push_back(ids);
      tags.push_back(pick(0, c.num_labels - 1));
    }
    c.words.push_back(words);
    c.tags.push_back(tags);
  }
  return c;
}

std::string word_text(const TokenCase& c, const std::vector<int>& ids) {
  std::string text;
  for (int id : ids) text += c.family->vocabulary.text(id);
  if (!text.empty() && text[0] == ' ') text.erase(0, 1);
  return text;
}

// The data sentences as the reference batch: [CLS] sub-tokens [SEP], padded to the longest, each
// word's tag on its first sub-token and -100 on the rest.
ref::ModelBatch data_batch(const TokenCase& c) {
  const MatrixVocabulary& v = c.family->vocabulary;
  ref::ModelBatch b;
  b.B = static_cast<int>(c.words.size());
  std::vector<std::vector<int>> ids(b.B);
  std::vector<std::vector<double>> labels(b.B);
  for (int s = 0; s < b.B; ++s) {
    ids[s] = {v.cls};
    labels[s] = {kIgnored};
    for (std::size_t w = 0; w < c.words[s].size(); ++w) {
      for (std::size_t k = 0; k < c.words[s][w].size(); ++k) {
        ids[s].push_back(c.words[s][w][k]);
        labels[s].push_back(k == 0 ? c.tags[s][w] : kIgnored);
      }
    }
    ids[s].push_back(v.sep);
    labels[s].push_back(kIgnored);
    b.T = std::max(b.T, static_cast<int>(ids[s].size()));
  }
  for (int s = 0; s < b.B; ++s) {
    for (int t = 0; t < b.T; ++t) {
      const bool real = t < static_cast<int>(ids[s].size());
      b.input_ids.push_back(real ? ids[s][t] : v.pad);
      b.attention_mask.push_back(real ? 1 : 0);
      b.token_type_ids.push_back(0);
      b.labels.push_back(real ? labels[s][t] : kIgnored);
    }
  }
  return b;
}

// The data file: CoNLL ("word TAG" lines, a blank line after each sentence) or JSONL
// ({"words": [...], "ner_tags": [tag ids]}).
std::string data_file(const TokenCase& c) {
  std::string out;
  for (std::size_t s = 0; s < c.words.size(); ++s) {
    nlohmann::json words = nlohmann::json::array(), tags = nlohmann::json::array();
    for (std::size_t w = 0; w < c.words[s].size(); ++w) {
      const std::string word = word_text(c, c.words[s][w]);
      if (c.conll) out += word + " " + kTags[c.tags[s][w]] + "\n";
      words.push_back(word);
      tags.push_back(c.tags[s][w]);
    }
    out += c.conll ? "\n" : nlohmann::json{{"words", words}, {"ner_tags", tags}}.dump() + "\n";
  }
  return out;
}

nlohmann::json batch_json(const ref::ModelBatch& b) {
  auto rows = [&](const auto& v) {
    nlohmann::json out = nlohmann::json::array();
    for (int r = 0; r < b.B; ++r) {
      nlohmann::json row = nlohmann::json::array();
      for (int t = 0; t < b.T; ++t) row.push_back(static_cast<int>(v[r * b.T + t]));
      out.push_back(row);
    }
    return out;
  };
  return {{"input_ids", rows(b.input_ids)},
          {"attention_mask", rows(b.attention_mask)},
          {"token_type_ids", rows(b.token_type_ids)},
          {"labels", rows(b.labels)}};
}

// The values of the real tokens' rows of logits laid out (B·T,K).
std::vector<double> real_rows(const std::vector<double>& logits, const ref::ModelBatch& b, int K) {
  std::vector<double> out;
  for (std::size_t p = 0; p < b.attention_mask.size(); ++p)
    if (b.attention_mask[p] != 0) out.insert(out.end(), &logits[p * K], &logits[p * K] + K);
  return out;
}

// Per word of the data: the reference's argmax at its first token, and whether its top two
// logits z are closer than 2 · tol · max(‖z‖, logit_scale(K)) (see the top).
struct WordArgmax {
  std::vector<std::vector<int>> tag;
  std::vector<std::vector<bool>> fragile;
  int words = 0, correct = 0, fragile_words = 0;
};

WordArgmax word_argmax(const TokenCase& c, const ref::ModelBatch& data,
                       const std::vector<double>& logits, double tol) {
  const int K = c.num_labels;
  WordArgmax a;
  for (int s = 0; s < data.B; ++s) {
    a.tag.emplace_back();
    a.fragile.emplace_back();
    int t = 1;  // after [CLS]
    for (std::size_t w = 0; w < c.words[s].size(); ++w) {
      const double* z = &logits[(std::int64_t{s} * data.T + t) * K];
      std::vector<double> sorted(z, z + K);
      std::sort(sorted.rbegin(), sorted.rend());
      const int best = static_cast<int>(std::max_element(z, z + K) - z);
      const double scale = std::max(l2(z, K), logit_scale(K));
      const bool fragile = sorted[0] - sorted[1] < 2 * tol * scale;
      a.tag.back().push_back(best);
      a.fragile.back().push_back(fragile);
      ++a.words;
      a.correct += best == c.tags[s][w];
      a.fragile_words += fragile;
      t += static_cast<int>(c.words[s][w].size());
    }
  }
  return a;
}

class TokenMatrix : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    c_ = make_token_case(GetParam());
    const std::string vocab = c_.family->vocabulary.write(tmp_ / "tokenizer");
    std::string labels;
    for (int k = 0; k < c_.num_labels; ++k) labels += (k ? "," : "") + kTags[k];
    RunResult r =
        run_bertfit(init_args(*c_.family, c_.sizes, c_.activation, c_.index, tmp_ / "m", vocab) +
                    " --task token-classification --labels " + labels);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    state_ = load_model(tmp_ / "m");
    ASSERT_EQ(state_.config.head, HeadKind::kTokenClassification);
    ASSERT_EQ(state_.config.num_labels, c_.num_labels);
    ASSERT_EQ(state_.config.vocab_size, c_.family->vocabulary.size);
    params_ = params_of(tmp_ / "m");
    compute_ = " --precision " + c_.precision + " --threads " + std::to_string(c_.threads);
    write_text(tmp_ / data_name(), data_file(c_));
  }
  bool bf16() const { return c_.precision == "bf16"; }
  std::string data_name() const { return c_.conll ? "d.conll" : "d.jsonl"; }
  // The data flags of eval and train (predict reads no tags).
  std::string tagged_flags() const {
    return c_.conll ? "" : " --tokens-column words --tags-column ner_tags";
  }

  // eval and predict of the data file under `compute` against the reference `want` on it, to
  // the forward tolerance `tol`.
  void expect_eval_and_predict(const ref::ModelBatch& data, const ref::ModelResult& want,
                               const std::string& compute, double tol) {
    const WordArgmax a = word_argmax(c_, data, want.logits, tol);
    const std::string file = " --max-seq-len " + std::to_string(kMaxSeqLen) + compute;
    RunResult e = run_bertfit("eval --model " + (tmp_ / "m") + " --dev-file " +
                              (tmp_ / data_name()) + tagged_flags() + " --batch-size 3" + file);
    ASSERT_EQ(e.exit_code, 0) << e.err;
    const nlohmann::json ev = nlohmann::json::parse(e.out);
    EXPECT_NEAR(ev["eval_loss"].get<double>(), want.loss,
                tol * std::max(1.0, std::fabs(want.loss)));
    std::printf("%s: %d of %d words fragile at %s\n", describe(c_).c_str(), a.fragile_words,
                a.words, compute.c_str());
    EXPECT_LE(std::fabs(ev["eval_accuracy"].get<double>() * a.words - a.correct),
              a.fragile_words + 1e-6);
    if (a.fragile_words == 0) {  // seqeval of the reference's tags
      std::vector<std::vector<std::string>> truth, predicted;
      for (std::size_t s = 0; s < c_.words.size(); ++s) {
        truth.emplace_back(), predicted.emplace_back();
        for (std::size_t w = 0; w < c_.words[s].size(); ++w) {
          truth.back().push_back(kTags[c_.tags[s][w]]);
          predicted.back().push_back(kTags[a.tag[s][w]]);
        }
      }
      const SeqevalScores want_scores = seqeval_scores(truth, predicted);
      EXPECT_NEAR(ev["eval_precision"].get<double>(), want_scores.precision, 1e-12);
      EXPECT_NEAR(ev["eval_recall"].get<double>(), want_scores.recall, 1e-12);
      EXPECT_NEAR(ev["eval_f1"].get<double>(), want_scores.f1, 1e-12);
    }

    RunResult p =
        run_bertfit("predict --model " + (tmp_ / "m") + " --input " + (tmp_ / data_name()) +
                    (c_.conll ? "" : " --tokens-column words") + " --batch-size 4" + file);
    ASSERT_EQ(p.exit_code, 0) << p.err;
    std::size_t s = 0;
    int differ = 0;
    for (std::size_t i = 0, n; (n = p.out.find('\n', i)) != std::string::npos; i = n + 1, ++s) {
      ASSERT_LT(s, c_.words.size());
      const nlohmann::json line = nlohmann::json::parse(p.out.substr(i, n - i));
      EXPECT_EQ(line["row"], s);
      ASSERT_EQ(line["words"].size(), c_.words[s].size()) << line.dump();
      ASSERT_EQ(line["tags"].size(), c_.words[s].size()) << line.dump();
      for (std::size_t w = 0; w < c_.words[s].size(); ++w) {
        EXPECT_EQ(line["words"][w], word_text(c_, c_.words[s][w]));
        const bool same = line["tags"][w] == kTags[a.tag[s][w]];
        differ += !same;
        EXPECT_TRUE(same || a.fragile[s][w]) << "sentence " << s << " word " << w << ": "
                                             << line["tags"][w] << " for " << kTags[a.tag[s][w]];
      }
    }
    EXPECT_EQ(s, c_.words.size());
    std::printf("%s: predict differs on %d fragile words\n", describe(c_).c_str(), differ);
  }

  TokenCase c_;
  TempDir tmp_;
  ModelState state_;
  std::vector<double> params_;
  std::string compute_;
};

TEST_P(TokenMatrix, ForwardMatchesTheReference) {
  SCOPED_TRACE(describe(c_));
  std::printf("%s\n", describe(c_).c_str());
  const ref::ModelResult want =
      ref::model_forward_backward(state_.config, state_.layout, params_, c_.batch);
  write_text(tmp_ / "batch.json", batch_json(c_.batch).dump());
  const double tol = bf16() ? 3e-2 : 1e-4;
  const int K = c_.num_labels;
  const std::vector<double> want_real = real_rows(want.logits, c_.batch, K);
  for (const std::string mode : {"", " --train-mode", " --grads", " --train-mode --grads"}) {
    SCOPED_TRACE(mode);
    const bool grads = mode.find("--grads") != std::string::npos;
    RunResult r =
        run_bertfit("forward --model " + (tmp_ / "m") + " --batch " + (tmp_ / "batch.json") +
                    compute_ + mode + (grads ? " " + (tmp_ / "g.safetensors") : ""));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json out = nlohmann::json::parse(r.out);
    const std::vector<double> got = flat_json(out["logits"]);  // (B,T,K)
    ASSERT_EQ(got.size(), want.logits.size());
    EXPECT_LT(rel_err(real_rows(got, c_.batch, K), want_real, logit_scale(want_real.size())), tol);
    EXPECT_NEAR(out["loss"].get<double>(), want.loss, tol * std::max(1.0, std::fabs(want.loss)));
    if (grads)
      expect_grads_match(read_grads(tmp_ / "g.safetensors", state_.layout), want.grads,
                         state_.layout, bf16());
  }
}

TEST_P(TokenMatrix, EvalPredictAndATrainStepMatchTheReference) {
  SCOPED_TRACE(describe(c_));
  const ref::ModelBatch data = data_batch(c_);
  const ref::ModelResult want =
      ref::model_forward_backward(state_.config, state_.layout, params_, data);
  expect_eval_and_predict(data, want, compute_, bf16() ? 3e-2 : 1e-4);

  // train: one AdamW step on all sentences at once, no clipping.
  const double lr = 1e-3;
  RunResult t = run_bertfit("train --model " + (tmp_ / "m") + " --output " + (tmp_ / "t") +
                            " --train-file " + (tmp_ / data_name()) + tagged_flags() +
                            " --max-steps 1 --batch-size " + std::to_string(c_.words.size()) +
                            " --lr 1e-3 --max-grad-norm 0 --eval-every never --max-seq-len " +
                            std::to_string(kMaxSeqLen) + compute_);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const std::vector<double> at_bf16 =
      bf16() ? ref::model_forward_backward(state_.config, state_.layout, rounded_to_bf16(params_),
                                           data)
                   .grads
             : std::vector<double>();
  expect_first_adamw_step(params_, params_of(tmp_ / "t"), want.grads, at_bf16, lr, bf16());
}

// int8 inference (forward, eval, predict) of every case, whatever its training precision.
TEST_P(TokenMatrix, Int8InferenceMatchesTheReference) {
  SCOPED_TRACE(describe(c_));
  const std::string compute = " --precision int8 --threads " + std::to_string(c_.threads);
  const ref::ModelResult want =
      ref::model_forward_backward(state_.config, state_.layout, params_, c_.batch);
  write_text(tmp_ / "batch.json", batch_json(c_.batch).dump());
  RunResult r = run_bertfit("forward --model " + (tmp_ / "m") + " --batch " +
                            (tmp_ / "batch.json") + compute);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  const int K = c_.num_labels;
  const std::vector<double> want_real = real_rows(want.logits, c_.batch, K);
  const double logits_err = rel_err(real_rows(flat_json(out["logits"]), c_.batch, K), want_real,
                                    logit_scale(want_real.size()));
  std::printf("int8 %s: logits %.3g\n", describe(c_).c_str(), logits_err);
  EXPECT_LT(logits_err, kInt8Tolerance);
  EXPECT_NEAR(out["loss"].get<double>(), want.loss,
              kInt8Tolerance * std::max(1.0, std::fabs(want.loss)));
  RunResult g = run_bertfit("forward --model " + (tmp_ / "m") + " --batch " +
                            (tmp_ / "batch.json") + compute + " --grads " + (tmp_ / "g"));
  EXPECT_EQ(g.exit_code, 1) << g.err;
  EXPECT_NE(g.err.find("int8 is for inference"), std::string::npos) << g.err;

  const ref::ModelBatch data = data_batch(c_);
  expect_eval_and_predict(data,
                          ref::model_forward_backward(state_.config, state_.layout, params_, data),
                          compute, kInt8Tolerance);
}

// A label on a padding position (attention_mask 0, not -100): transformers computes that
// token's logits like any other's (it attends to the real tokens) and its loss counts them, as
// the reference does. bertfit's unpadded forward leaves padding rows' logits 0 (model/head.cc)
// and scores those: log K instead. Matching transformers or refusing the label in one line
// would both pass: `forward` refuses it, naming the sequence and token (before, it scored
// padding's zero logits: bert_0's model gave loss 1.99230 against transformers' 1.99560).
TEST(TokenMatrixPadding, ALabelOnPaddingMatchesTransformersOrIsRefused) {
  const TokenCase c = make_token_case(2);  // bert, fp32; row 1 is [CLS] and padding
  ASSERT_GE(c.batch.B, 2);
  TempDir tmp;
  const std::string vocab = c.family->vocabulary.write(tmp / "tokenizer");
  RunResult r =
      run_bertfit(init_args(*c.family, c.sizes, c.activation, c.index, tmp / "m", vocab) +
                  " --task token-classification --num-labels " + std::to_string(c.num_labels));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ModelState state = load_model(tmp / "m");
  ref::ModelBatch b = c.batch;
  b.labels[b.T + 2] = 0;  // row 1, a padding position
  ASSERT_EQ(b.attention_mask[b.T + 2], 0);
  const ref::ModelResult want =
      ref::model_forward_backward(state.config, state.layout, params_of(tmp / "m"), b);
  write_text(tmp / "batch.json", batch_json(b).dump());
  r = run_bertfit("forward --model " + (tmp / "m") + " --batch " + (tmp / "batch.json"));
  if (r.exit_code == 1) {
    EXPECT_NE(r.err.find("on token 2, which is padding (attention_mask 0); give -100 there"),
              std::string::npos)
        << r.err;
    return;
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NEAR(nlohmann::json::parse(r.out)["loss"].get<double>(), want.loss,
              1e-4 * std::max(1.0, want.loss));
}

// Named by family and case: Tokens/TokenMatrix.<test>/xlm_roberta_1.
INSTANTIATE_TEST_SUITE_P(Tokens, TokenMatrix,
                         ::testing::Range(0, static_cast<int>(matrix_families().size()) *
                                                 kTokenCasesPerFamily),
                         [](const ::testing::TestParamInfo<int>& info) {
                           std::string name =
                               matrix_families().at(info.param / kTokenCasesPerFamily).arch;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name + "_" + std::to_string(info.param % kTokenCasesPerFamily);
                         });

}  // namespace
}  // namespace bertfit::testing
