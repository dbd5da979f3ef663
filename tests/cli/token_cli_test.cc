// Token classification through the binary (issue 33): `train` from tagged words (a CoNLL file,
// tagged JSONL with --tokens-column / --tags-column and integer tags) follows transformers
// 4.28.1's trajectory on the golden token classifiers step by step; `eval` on tagged words gives
// seqeval's scores of the model's own predictions (taken from `forward` on the same aligned
// batch); a base checkpoint starts a token head and says so; the saved model is a
// *ForTokenClassification with the data's tags; errors name the file, line, tag or flag.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "data/seqeval.h"
#include "io/safetensors.h"
#include "tests/util/compare.h"

namespace bertfit::testing {
namespace {

namespace fs = std::filesystem;

std::string golden(const std::string& model) { return shared_dir() + "/golden/" + model; }

nlohmann::json golden_batch(const std::string& model) {
  return nlohmann::json::parse(read_text(golden(model) + "/batch.json"));
}

// The golden batch's words and word tags as a CoNLL file (a word and its tag per line).
std::string write_conll(const TempDir& tmp, const std::string& model) {
  const nlohmann::json batch = golden_batch(model);
  std::string text;
  for (std::size_t s = 0; s < batch["words"].size(); ++s) {
    for (std::size_t w = 0; w < batch["words"][s].size(); ++w) {
      text += batch["words"][s][w].get<std::string>() + " " +
              batch["word_tags"][s][w].get<std::string>() + "\n";
    }
    text += "\n";
  }
  write_text(tmp / "train.conll", text);
  return tmp / "train.conll";
}

// A copy of a golden token classifier with dropout 0 (as its trajectory was made) and the
// architectures save_pretrained writes.
std::string model_copy(const TempDir& tmp, const std::string& model, const std::string& cls) {
  const std::string dir = tmp / "m";
  fs::copy(golden(model) + "/model", dir);
  nlohmann::json config = nlohmann::json::parse(read_text(dir + "/config.json"));
  config["hidden_dropout_prob"] = config["attention_probs_dropout_prob"] = 0.0;
  config["classifier_dropout"] = 0.0;
  config["architectures"] = {cls};
  write_text(dir + "/config.json", config.dump(2));
  return dir;
}

std::string T_of(const std::string& model) {
  return std::to_string(golden_batch(model)["input_ids"][0].size());
}

// golden.json's 6 AdamW steps (batches of 4 in file order, warmup 2, weight decay 0.01,
// clipping at 1) from the words: each step's loss, learning rate and gradient norm, and the
// final parameters (‖ours − HF's‖ ≤ 2e-3 ‖HF's‖ per tensor). The label ids are the model's
// nine tags though the data holds only some of them (run_ner keeps a model's own labels).
TEST(TokenCli, TrajectoryFromACoNLLFileMatchesTransformers) {
  for (auto [model, cls] : {std::pair{"bert-tokcls-tiny", "BertForTokenClassification"},
                            std::pair{"roberta-tokcls-tiny", "RobertaForTokenClassification"}}) {
    SCOPED_TRACE(model);
    TempDir tmp;
    const std::string m = model_copy(tmp, model, cls), conll = write_conll(tmp, model);
    const nlohmann::json t =
        nlohmann::json::parse(read_text(golden(model) + "/golden.json"))["trajectory"];
    RunResult r =
        run_bertfit("train --model " + m + " --output " + (tmp / "out") + " --train-file " + conll +
                    " --no-shuffle --batch-size 4 --max-steps 6 --lr " + t["lr"].dump() +
                    " --warmup-steps 2 --weight-decay " + t["weight_decay"].dump() +
                    " --max-seq-len " + T_of(model) + " --log-every 1 --eval-every never");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream records(read_text(tmp / "out/metrics.jsonl"));
    int step = 0;
    for (std::string line; std::getline(records, line);) {
      const nlohmann::json rec = nlohmann::json::parse(line);
      if (!rec.contains("grad_norm")) continue;
      ASSERT_LT(step, 6);
      const double loss = t["losses"][step], norm = t["grad_norms_before_clip"][step];
      EXPECT_NEAR(rec["loss"].get<double>(), loss, 1e-4 * loss) << "step " << step;
      EXPECT_NEAR(rec["lr"].get<double>(), t["lrs"][step].get<double>(), 1e-12) << step;
      EXPECT_NEAR(rec["grad_norm"].get<double>(), norm, 1e-3 * norm) << "step " << step;
      ++step;
    }
    EXPECT_EQ(step, 6);
    expect_final_parameters(tmp / "out/model.safetensors", golden(model), t);
    const nlohmann::json saved = nlohmann::json::parse(read_text(tmp / "out/config.json"));
    EXPECT_EQ(saved["architectures"], nlohmann::json{cls});
    EXPECT_EQ(saved["id2label"].size(), 9u);  // the model's tags kept
  }
}

// eval's scores are seqeval's (data/seqeval.h, held to the real seqeval by its own test) of
// the model's predictions on each word's first sub-token: `forward` on the golden batch (the
// same alignment, the aligned batch of transformers) gives those predictions independently.
TEST(TokenCli, EvalScoresTheModelsPredictionsOfEachWord) {
  const std::string model = "bert-tokcls-tiny";
  TempDir tmp;
  const std::string m = model_copy(tmp, model, "BertForTokenClassification");
  const std::string conll = write_conll(tmp, model);
  RunResult e =
      run_bertfit("eval --model " + m + " --dev-file " + conll + " --max-seq-len " + T_of(model));
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const nlohmann::json ev = nlohmann::json::parse(last_line(e.out));
  RunResult f = run_bertfit("forward --model " + m + " --batch " + golden(model) + "/batch.json");
  ASSERT_EQ(f.exit_code, 0) << f.err;
  const nlohmann::json logits = nlohmann::json::parse(f.out)["logits"];
  const nlohmann::json batch = golden_batch(model);
  const nlohmann::json config = nlohmann::json::parse(read_text(m + "/config.json"));
  std::vector<std::vector<std::string>> truth, predicted;
  for (std::size_t s = 0; s < batch["labels"].size(); ++s) {
    std::vector<std::string> t, p;
    for (std::size_t j = 0; j < batch["labels"][s].size(); ++j) {
      const int y = batch["labels"][s][j];
      if (y < 0) continue;
      const std::vector<float> row = logits[s][j];
      const auto best = std::max_element(row.begin(), row.end()) - row.begin();
      t.push_back(config["id2label"][std::to_string(y)]);
      p.push_back(config["id2label"][std::to_string(best)]);
    }
    truth.push_back(t);
    predicted.push_back(p);
  }
  const SeqevalScores want = seqeval_scores(truth, predicted);
  EXPECT_NEAR(ev["eval_precision"].get<double>(), want.precision, 1e-12);
  EXPECT_NEAR(ev["eval_recall"].get<double>(), want.recall, 1e-12);
  EXPECT_NEAR(ev["eval_f1"].get<double>(), want.f1, 1e-12);
  EXPECT_NEAR(ev["eval_accuracy"].get<double>(), want.accuracy, 1e-12);
  for (const EntityTypeScores& type : want.types) {
    EXPECT_NEAR(ev["eval_" + type.type + "_f1"].get<double>(), type.f1, 1e-12) << type.type;
  }
  EXPECT_GT(want.types.size(), 1u);
  EXPECT_EQ(ev["examples"], 8);
}

// Tagged JSONL under other keys, with integer tags naming the model's id2label (as the Hub's
// datasets store them), trains a base checkpoint into a token classifier: a new head said in
// transformers' words, the data's tags as its labels, then eval on the same file.
TEST(TokenCli, BaseCheckpointLearnsTagsFromJsonl) {
  TempDir tmp;
  init_tiny_model(tmp / "base", "bert");
  const std::string jsonl = tmp / "tags.jsonl";
  std::string text;
  const char* sentences[][4] = {{"Paris", "is", "in", "France"},
                                {"Anna", "lives", "in", "Berlin"},
                                {"the", "EU", "met", "today"}};
  const char* tags[][4] = {
      {"B-LOC", "O", "O", "B-LOC"}, {"B-PER", "O", "O", "B-LOC"}, {"O", "B-ORG", "O", "O"}};
  for (int s = 0; s < 3; ++s) {
    nlohmann::json row{{"words", nlohmann::json::array()}, {"ner", nlohmann::json::array()}};
    for (int w = 0; w < 4; ++w) {
      row["words"].push_back(sentences[s][w]);
      row["ner"].push_back(tags[s][w]);
    }
    text += row.dump() + "\n";
  }
  write_text(jsonl, text);
  RunResult r = run_bertfit("train --model " + (tmp / "base") + " --output " + (tmp / "out") +
                            " --train-file " + jsonl + " --dev-file " + jsonl +
                            " --tokens-column words --tags-column ner --max-steps 2 "
                            "--batch-size 2 --max-seq-len 16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("Some weights of BertForTokenClassification were not initialized"),
            std::string::npos)
      << r.err;
  const nlohmann::json saved = nlohmann::json::parse(read_text(tmp / "out/config.json"));
  EXPECT_EQ(saved["architectures"], nlohmann::json{"BertForTokenClassification"});
  EXPECT_EQ(saved["id2label"],
            (nlohmann::json{{"0", "B-LOC"}, {"1", "B-ORG"}, {"2", "B-PER"}, {"3", "O"}}));
  const nlohmann::json last = nlohmann::json::parse(last_line(r.out));
  for (const char* k : {"eval_precision", "eval_recall", "eval_f1", "eval_accuracy"}) {
    EXPECT_TRUE(last.contains(k)) << k << ": " << last;
  }
  // Integer tags name the trained model's id2label; eval reads them so.
  write_text(tmp / "ids.jsonl", R"({"words": ["Paris", "is", "nice"], "ner": [0, 3, 3]})"
                                "\n");
  RunResult e = run_bertfit("eval --model " + (tmp / "out") + " --dev-file " + (tmp / "ids.jsonl") +
                            " --tokens-column words --tags-column ner");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_EQ(nlohmann::json::parse(last_line(e.out))["examples"], 1);
  RunResult i = run_bertfit("inspect " + (tmp / "out"));
  EXPECT_NE(i.out.find("head:          token classification"), std::string::npos) << i.out;
}

// predict on pre-split words gives each word the tag `eval` scores (the argmax at its first
// sub-token, here taken from `forward` on the aligned golden batch) and entities whose spans
// are the words' characters in the words joined by spaces, for every aggregation strategy.
TEST(TokenCli, PredictTagsEachWordAndSpansItsEntities) {
  const std::string model = "bert-tokcls-tiny";
  TempDir tmp;
  const std::string m = model_copy(tmp, model, "BertForTokenClassification");
  const std::string conll = write_conll(tmp, model);
  RunResult f = run_bertfit("forward --model " + m + " --batch " + golden(model) + "/batch.json");
  ASSERT_EQ(f.exit_code, 0) << f.err;
  const nlohmann::json logits = nlohmann::json::parse(f.out)["logits"];
  const nlohmann::json batch = golden_batch(model);
  const nlohmann::json config = nlohmann::json::parse(read_text(m + "/config.json"));
  for (const char* how : {"simple", "first", "average", "max", "none"}) {
    SCOPED_TRACE(how);
    RunResult p = run_bertfit("predict --model " + m + " --input " + conll + " --max-seq-len " +
                              T_of(model) + " --aggregation-strategy " + how);
    ASSERT_EQ(p.exit_code, 0) << p.err;
    std::istringstream lines(p.out);
    std::size_t s = 0, entities = 0;
    for (std::string line; std::getline(lines, line); ++s) {
      const nlohmann::json j = nlohmann::json::parse(line);
      ASSERT_LT(s, batch["words"].size());
      EXPECT_EQ(j["row"], s);
      EXPECT_EQ(j["words"], batch["words"][s]);
      // The tag of word w: the argmax at its first sub-token (label ≠ -100 in the batch).
      std::size_t w = 0;
      for (std::size_t t = 0; t < batch["labels"][s].size(); ++t) {
        if (batch["labels"][s][t].get<int>() < 0) continue;
        const std::vector<float> row = logits[s][t];
        const auto best = std::max_element(row.begin(), row.end()) - row.begin();
        EXPECT_EQ(j["tags"][w], config["id2label"][std::to_string(best)]) << s << " " << w;
        ++w;
      }
      for (; w < j["tags"].size(); ++w) EXPECT_TRUE(j["tags"][w].is_null()) << "cut word " << w;
      std::string text;
      for (const auto& word : batch["words"][s]) {
        if (!text.empty()) text += ' ';
        text += word.get<std::string>();
      }
      for (const auto& e : j["entities"]) {
        ++entities;
        EXPECT_EQ(char_slice(text, e["start"], e["end"]), e["word"].get<std::string>()) << e;
        EXPECT_TRUE(e.contains(std::string(how) == "none" ? "entity" : "entity_group")) << e;
      }
    }
    EXPECT_EQ(s, batch["words"].size());
    EXPECT_GT(entities, 0u);
  }
}

// Raw text: the tokenizer's offsets give the spans (accents, emoji, runs of spaces), for
// WordPiece and byte-level BPE, every strategy.
TEST(TokenCli, PredictOnRawTextSpansTheTextsCharacters) {
  const std::vector<std::string> texts = {"Zoë  Müller flew from Köln to São Paulo 🎉 with   Ana.",
                                          "  leading spaces and ünïcödé  ",
                                          "EU rejects German call to boycott British lamb .", "x"};
  for (auto [model, cls] : {std::pair{"bert-tokcls-tiny", "BertForTokenClassification"},
                            std::pair{"roberta-tokcls-tiny", "RobertaForTokenClassification"}}) {
    SCOPED_TRACE(model);
    TempDir tmp;
    const std::string m = model_copy(tmp, model, cls);
    std::string jsonl;
    for (const std::string& t : texts) jsonl += nlohmann::json{{"text", t}}.dump() + "\n";
    write_text(tmp / "texts.jsonl", jsonl);
    for (const char* how : {"simple", "first", "average", "max", "none"}) {
      SCOPED_TRACE(how);
      RunResult p =
          run_bertfit("predict --model " + m + " --input " + (tmp / "texts.jsonl") +
                      " --text-a-column text --max-seq-len 64 --aggregation-strategy " + how);
      ASSERT_EQ(p.exit_code, 0) << p.err;
      std::istringstream lines(p.out);
      std::size_t row = 0, entities = 0;
      for (std::string line; std::getline(lines, line); ++row) {
        const nlohmann::json j = nlohmann::json::parse(line);
        ASSERT_LT(row, texts.size());
        EXPECT_EQ(j["words"].size(), j["tags"].size());
        for (const auto& e : j["entities"]) {
          ++entities;
          EXPECT_EQ(char_slice(texts[row], e["start"], e["end"]), e["word"].get<std::string>())
              << e;
        }
        for (const auto& word : j["words"]) {
          EXPECT_NE(texts[row].find(word.get<std::string>()), std::string::npos) << word;
        }
      }
      EXPECT_EQ(row, texts.size());
      EXPECT_GT(entities, 0u);
    }
  }
}

// init writes a token classifier with the given tags, which trains on tagged words keeping
// their ids, and whose predictions tag every word.
TEST(TokenCli, InitMakesATokenClassifierWithItsTags) {
  TempDir tmp;
  RunResult r = run_bertfit(
      "init --arch bert --task token-classification --labels O,B-LOC "
      "--labels I-LOC --output " +
      (tmp / "m") +
      " --set num_hidden_layers=1 --set hidden_size=16 "
      "--set num_attention_heads=2 --set intermediate_size=32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("initialised bert (BertForTokenClassification)"), std::string::npos)
      << r.out;
  const nlohmann::json c = nlohmann::json::parse(read_text(tmp / "m/config.json"));
  EXPECT_EQ(c["architectures"], nlohmann::json{"BertForTokenClassification"});
  EXPECT_EQ(c["id2label"], (nlohmann::json{{"0", "O"}, {"1", "B-LOC"}, {"2", "I-LOC"}}));
  EXPECT_EQ(tensors_of(tmp / "m/model.safetensors").count("bert.pooler.dense.weight"), 0u);
  write_text(tmp / "t.conll", "Paris B-LOC\nis O\nnice O\n\nNew B-LOC\nYork I-LOC\n\n");
  r = run_bertfit("train --model " + (tmp / "m") + " --output " + (tmp / "out") + " --train-file " +
                  (tmp / "t.conll") + " --max-steps 1 --batch-size 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("newly initialized"), std::string::npos) << r.err;  // its own head
  const nlohmann::json saved = nlohmann::json::parse(read_text(tmp / "out/config.json"));
  EXPECT_EQ(saved["id2label"], c["id2label"]);  // the model's ids, not the data's sorted tags
  r = run_bertfit("predict --model " + (tmp / "out") + " --input " + (tmp / "t.conll"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out.substr(0, r.out.find('\n')))["tags"].size(), 3u);
  r = run_bertfit("init --arch bert --task token-classification --labels O,O --output " +
                  (tmp / "bad"));
  EXPECT_NE(r.err.find("--labels names 'O' twice"), std::string::npos) << r.err;
}

TEST(TokenCli, ErrorsNameTheFileLineTagOrFlag) {
  TempDir tmp;
  const std::string m = model_copy(tmp, "bert-tokcls-tiny", "BertForTokenClassification");
  write_text(tmp / "bad.conll", "EU B-ORG\nrejects O\nGerman B-FOO\n\n");
  RunResult r = run_bertfit("eval --model " + m + " --dev-file " + (tmp / "bad.conll"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find((tmp / "bad.conll") + ":3: tag 'B-FOO' is not one of the model's tags"),
            std::string::npos)
      << r.err;
  // A token classifier does not score labelled texts, nor a sequence classifier tagged words.
  write_text(tmp / "rows.csv", "text,label\na b,LABEL_0\n");
  r = run_bertfit("eval --model " + m + " --dev-file " + (tmp / "rows.csv") +
                  " --text-a-column text --label-column label");
  EXPECT_NE(r.err.find("is a token classification model (BertForTokenClassification) but"),
            std::string::npos)
      << r.err;
  init_tiny_model(tmp / "seq", "bert");
  write_text(tmp / "ok.conll", "EU B-ORG\nrejects O\n\n");
  r = run_bertfit("eval --model " + (tmp / "seq") + " --dev-file " + (tmp / "ok.conll"));
  EXPECT_NE(r.err.find("is a sequence classification model (BertForSequenceClassification) but " +
                       (tmp / "ok.conll") + " holds tagged words"),
            std::string::npos)
      << r.err;
  // The tags decide the head's labels: flags for sentence labels do not apply.
  for (const char* flag : {"--num-labels 3", "--regression", "--problem-type regression"}) {
    r = run_bertfit("train --model " + m + " --output " + (tmp / "out") + " --train-file " +
                    (tmp / "ok.conll") + " " + flag + " --max-steps 1");
    EXPECT_NE(r.exit_code, 0) << flag;
    EXPECT_NE(r.err.find("holds tagged words (token classification): --regression, --num-labels "
                         "and --problem-type do not apply"),
              std::string::npos)
        << flag << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(tmp / "out"));
  // A CoNLL file is no table: --format conll with --text-a-column is still tagged data, and a
  // .conll file read as a table names what it is.
  write_text(tmp / "words.txt", "EU B-ORG\nrejects O\n\n");
  r = run_bertfit("train --model " + m + " --output " + (tmp / "out2") + " --train-file " +
                  (tmp / "words.txt") + " --format conll --max-steps 1 --batch-size 1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_bertfit("predict --model " + (tmp / "seq") + " --input " + (tmp / "ok.conll") +
                  " --text-a-column 0");
  EXPECT_NE(r.err.find(": a CoNLL file holds tagged words (token classification), not rows"),
            std::string::npos)
      << r.err;
  // A token classifier tags one text given as raw text, or pre-split words.
  r = run_bertfit("predict --model " + m + " --input " + (tmp / "rows.csv") +
                  " --text-a-column text --text-b-column label");
  EXPECT_NE(r.err.find("--text-b-column: a token classifier tags one text at a time"),
            std::string::npos)
      << r.err;
  r = run_bertfit("predict --model " + m + " --input " + (tmp / "rows.csv"));
  EXPECT_NE(r.err.find("give --text-a-column (raw texts), or tagged words"), std::string::npos)
      << r.err;
  r = run_bertfit("predict --model " + m + " --input " + (tmp / "ok.conll") +
                  " --aggregation-strategy longest");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--aggregation-strategy"), std::string::npos) << r.err;
}

// --skip-malformed leaves out a malformed sentence (CoNLL: up to its blank line; JSONL: its
// line) in train, eval and predict, says so, and predict answers it in its place; without it the
// first one is an error naming FILE:LINE. --id-column works on raw text and is refused for
// tagged words.
TEST(TokenCli, SkipMalformedSentencesAndIdColumn) {
  TempDir tmp;
  const std::string m = model_copy(tmp, "bert-tokcls-tiny", "BertForTokenClassification");
  write_text(tmp / "t.conll", "EU B-ORG\nrejects O\n\nGerman\nplan O\n\nParis B-LOC\n\n");
  write_text(tmp / "t.jsonl",
             "{\"tokens\": [\"EU\", \"rejects\"], \"tags\": [\"B-ORG\", \"O\"]}\n"
             "{\"tokens\": [\"German\"], \"tags\": []}\n"
             "not json\n"
             "{\"tokens\": [\"Paris\"], \"tags\": [\"B-LOC\"]}\n");
  const std::vector<std::pair<std::string, std::string>> files = {
      {tmp / "t.conll", ":4: the word 'German' has no tag"},
      {tmp / "t.jsonl", ":2: 'tokens' holds 1 word(s) but 'tags' holds 0 tag(s)"}};
  for (const auto& [file, first_error] : files) {
    SCOPED_TRACE(file);
    RunResult r = run_bertfit("eval --model " + m + " --dev-file " + file);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(file + first_error), std::string::npos) << r.err;
    r = run_bertfit("eval --model " + m + " --dev-file " + file + " --skip-malformed");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::size_t bad = file.ends_with(".jsonl") ? 2 : 1;
    EXPECT_NE(r.err.find(file + ": skipped " + std::to_string(bad) + " malformed sentence"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(nlohmann::json::parse(last_line(r.out))["examples"], 2) << r.out;
    r = run_bertfit("train --model " + m + " --output " + (tmp / "out") + " --train-file " + file +
                    " --skip-malformed --max-steps 1 --batch-size 2");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("malformed sentence"), std::string::npos) << r.err;
    fs::remove_all(tmp / "out");
    // predict answers every sentence in file order, a skipped one in its place; it needs no
    // tags, so only the line that is not JSON is malformed for it.
    r = run_bertfit("predict --model " + m + " --input " + file + " --skip-malformed");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(r.out);
    std::vector<nlohmann::json> out;
    for (std::string line; std::getline(lines, line);) out.push_back(nlohmann::json::parse(line));
    ASSERT_EQ(out.size(), 3 + bad - 1) << r.out;
    for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].value("row", -1), i) << out[i];
    EXPECT_EQ(out[1].value("words", nlohmann::json())[0], "German") << out[1];
    if (bad == 2) {
      EXPECT_EQ(out[2].value("line", 0), 3) << out[2];
      EXPECT_NE(out[2].value("skipped", "").find("invalid JSON"), std::string::npos) << out[2];
    }
    EXPECT_EQ(out.back()["words"], nlohmann::json{"Paris"});
    r = run_bertfit("predict --model " + m + " --input " + file + " --id-column id");
    EXPECT_NE(r.err.find("--id-column: tagged words"), std::string::npos) << r.err;
  }
  // Raw text: the table's rules, and --id-column.
  write_text(tmp / "raw.csv", "id,text\na1,Paris is nice\nbroken\na3,EU rejects\n");
  RunResult r = run_bertfit("predict --model " + m + " --input " + (tmp / "raw.csv") +
                            " --text-a-column text --id-column id --skip-malformed");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(lines, line);) out.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(out.size(), 3u) << r.out;
  EXPECT_EQ(out[0]["id"], "a1");
  EXPECT_TRUE(out[1].contains("skipped")) << out[1];
  EXPECT_EQ(out[2]["id"], "a3");
  EXPECT_EQ(out[2]["row"], 2);
  EXPECT_EQ(out[2]["words"], (nlohmann::json{"EU", "rejects"}));
}

// A token classifier's loss is cross-entropy whatever config.json's problem_type says, as
// transformers' *ForTokenClassification ignores it (a multi-label loss read labels past the
// batch's one per token; regression took MSE).
TEST(TokenCli, ProblemTypeDoesNotChangeATokenClassifiersLoss) {
  const std::string model = "bert-tokcls-tiny";
  TempDir tmp;
  const std::string m = model_copy(tmp, model, "BertForTokenClassification");
  const std::string batch = golden(model) + "/batch.json";
  RunResult f = run_bertfit("forward --model " + m + " --batch " + batch);
  ASSERT_EQ(f.exit_code, 0) << f.err;
  const double loss = nlohmann::json::parse(f.out)["loss"];
  // transformers' (dropout 0: the copy's).
  EXPECT_NEAR(loss, tensors_of(golden(model) + "/golden.safetensors").at("train.loss")[0], 1e-5);
  for (const char* problem : {"multi_label_classification", "regression"}) {
    nlohmann::json config = nlohmann::json::parse(read_text(m + "/config.json"));
    config["problem_type"] = problem;
    write_text(m + "/config.json", config.dump(2));
    f = run_bertfit("forward --model " + m + " --batch " + batch);
    ASSERT_EQ(f.exit_code, 0) << problem << ": " << f.err;
    EXPECT_EQ(nlohmann::json::parse(f.out)["loss"].get<double>(), loss) << problem;
  }
}

// Resume is exact for a token classifier as for a sequence classifier: from the checkpoint a
// 5-step run wrote at step 2 (shuffled, dropout on, bf16), --resume ends with that run's
// parameters, bit for bit.
TEST(TokenCli, ResumeContinuesExactly) {
  const std::string model = "bert-tokcls-tiny";
  TempDir tmp;
  const std::string m = tmp / "m";
  fs::copy(golden(model) + "/model", m);  // dropout as stored (0.1)
  nlohmann::json config = nlohmann::json::parse(read_text(m + "/config.json"));
  config["architectures"] = {"BertForTokenClassification"};
  write_text(m + "/config.json", config.dump(2));
  const std::string conll = write_conll(tmp, model);
  const std::string common = " --train-file " + conll +
                             " --batch-size 2 --max-steps 5 --precision bf16 --seed 5 "
                             "--eval-every never --save-every 2 --save-total-limit 0 "
                             "--max-seq-len " +
                             T_of(model);
  RunResult r = run_bertfit("train --model " + m + " --output " + (tmp / "straight") + common);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(fs::exists(tmp / "straight/checkpoint-2")) << r.err;
  r = run_bertfit("train --model " + m + " --output " + (tmp / "resumed") + common + " --resume " +
                  (tmp / "straight/checkpoint-2"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto want = tensors_of(tmp / "straight/model.safetensors");
  const auto got = tensors_of(tmp / "resumed/model.safetensors");
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, values] : want) EXPECT_EQ(got.at(name), values) << name;
  EXPECT_NE(tensors_of(m + "/model.safetensors").at("classifier.weight"),
            want.at("classifier.weight"));  // it trained
}

}  // namespace
}  // namespace bertfit::testing
