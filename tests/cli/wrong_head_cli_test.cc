// Loading the wrong head is not silent: eval, predict, forward and serve refuse a model whose
// head would start untrained (a base model, another task's head), in one line naming the folder
// or weights file, the head's tensors and what config.json's architectures says the checkpoint
// is; architectures decides even when the tensor names fit, and a config without it falls back
// to the tensors. A token classifier runs in forward, predict, serve (serve_token_cli_test.cc)
// and eval on tagged words, and eval refuses it labelled texts. train starts a new head from a
// token classifier, saying so and listing the other head's tensors as unused. An architectures
// entry of another family than model_type is an error naming config.json and the key.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "cli_util.h"
#include "io/safetensors.h"

namespace bertfit::testing {
namespace {

namespace fs = std::filesystem;

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

void set_architectures(const std::string& dir, const nlohmann::json& architectures) {
  nlohmann::json config = nlohmann::json::parse(read_text(dir + "/config.json"));
  if (architectures.is_null()) {
    config.erase("architectures");
  } else {
    config["architectures"] = architectures;
  }
  write_text(dir + "/config.json", config.dump(2));
}

// Rewrites dir/model.safetensors without the tensors whose names start with one of `drop`.
void drop_tensors(const std::string& dir, const std::vector<std::string>& drop) {
  const std::string weights = dir + "/model.safetensors";
  std::map<std::string, std::vector<float>> all = tensors_of(weights);
  SafetensorsFile f = SafetensorsFile::open(weights);
  std::vector<TensorToWrite> kept;
  for (const TensorInfo& t : f.tensors()) {
    bool dropped = false;
    for (const std::string& d : drop) dropped = dropped || t.name.rfind(d, 0) == 0;
    if (!dropped && all.count(t.name))
      kept.push_back({t.name, t.dtype, t.shape, all[t.name].data()});
  }
  write_safetensors(weights + ".new", kept);
  fs::rename(weights + ".new", weights);
}

// A copy of a golden token classifier (transformers 4.28.1), whose config.json as stored names
// no architectures; `architectures` adds what save_pretrained writes.
std::string golden_token_classifier(const TempDir& tmp, const std::string& name,
                                    const nlohmann::json& architectures) {
  const std::string dir = tmp / name;
  fs::copy(shared_dir() + "/golden/" + name + "/model", dir);
  set_architectures(dir, architectures);
  return dir;
}

// DistilBertForTokenClassification as the issue met it: the encoder and `classifier` (2 labels)
// without `pre_classifier`.
std::string distilbert_token_classifier(const TempDir& tmp) {
  const std::string dir = tmp / "distil-tokcls";
  init_tiny_model(dir, "distilbert");
  drop_tensors(dir, {"pre_classifier."});
  set_architectures(dir, {"DistilBertForTokenClassification"});
  return dir;
}

// `bertfit <command> --model M ...` with whatever else the command needs to get past its flags.
RunResult run_inference(const std::string& command, const std::string& model, const TempDir& tmp) {
  write_text(tmp / "rows.csv", "text,label\nthe first row,LABEL_0\nanother one,LABEL_1\n");
  write_text(tmp / "batch.json", R"({"input_ids": [[0, 40, 41, 2]]})");
  if (command == "predict") {
    return run_bertfit("predict --model " + model + " --input " + (tmp / "rows.csv") +
                       " --text-a-column text");
  }
  if (command == "eval") {
    return run_bertfit("eval --model " + model + " --dev-file " + (tmp / "rows.csv") +
                       " --text-a-column text --label-column label");
  }
  if (command == "forward") {
    return run_bertfit("forward --model " + model + " --batch " + (tmp / "batch.json"));
  }
  // serve: refused before it listens; a server that starts anyway is stopped after 30 s.
  const std::string cmd = "timeout 30 " + bertfit_binary() + " serve --port 0 --model " + model +
                          " </dev/null >" + (tmp / "serve.out") + " 2>" + (tmp / "serve.err");
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(tmp / "serve.out");
  r.err = read_text(tmp / "serve.err");
  return r;
}

const char* const kInferenceCommands[] = {"predict", "eval", "forward", "serve"};

// The refusal: non-zero exit, nothing on stdout, one line on stderr holding every needle, and
// no "newly initialized" warning before it.
void expect_refused(const RunResult& r, const std::vector<std::string>& needles,
                    const std::string& what) {
  EXPECT_NE(r.exit_code, 0) << what << ": " << r.err;
  EXPECT_EQ(r.out, "") << what;
  EXPECT_EQ(count_of(r.err, "\n"), 1u) << what << ": " << r.err;
  EXPECT_EQ(r.err.rfind("bertfit: error: ", 0), 0u) << what << ": " << r.err;
  for (const std::string& n : needles) {
    EXPECT_NE(r.err.find(n), std::string::npos) << what << ": '" << n << "' not in " << r.err;
  }
  EXPECT_EQ(r.err.find("newly initialized"), std::string::npos) << what << ": " << r.err;
  EXPECT_EQ(r.err.find("listening"), std::string::npos) << what << ": " << r.err;
}

// A token classifier is a model of its own head: `forward` runs it (a row of logits per token),
// predict tags words, and eval refuses to score it on labelled texts in one line.
TEST(WrongHeadCli, TokenClassifiersRunAsTokenClassifiersOnly) {
  TempDir tmp;
  write_text(tmp / "rows.csv", "text,label\nthe first row,LABEL_0\nanother one,LABEL_1\n");
  const std::string distil = distilbert_token_classifier(tmp);
  const std::string bert =
      golden_token_classifier(tmp, "bert-tokcls-tiny", {"BertForTokenClassification"});
  const std::string roberta =
      golden_token_classifier(tmp, "roberta-tokcls-tiny", {"RobertaForTokenClassification"});
  for (auto [model, cls, labels] : {std::tuple{distil, "DistilBertForTokenClassification", 2},
                                    std::tuple{bert, "BertForTokenClassification", 9},
                                    std::tuple{roberta, "RobertaForTokenClassification", 9}}) {
    // predict tags the texts' words (RoBERTa's 64 positions need a shorter --max-seq-len).
    const RunResult p = run_bertfit("predict --model " + model + " --input " + (tmp / "rows.csv") +
                                    " --text-a-column text --max-seq-len 32");
    ASSERT_EQ(p.exit_code, 0) << cls << ": " << p.err;
    EXPECT_EQ(nlohmann::json::parse(p.out.substr(0, p.out.find('\n')))["words"],
              (nlohmann::json{"the", "first", "row"}))
        << p.out;
    // eval scores a token classifier on tagged words, not on labelled texts (RoBERTa's 64
    // positions stop it at the default --max-seq-len first).
    if (model != roberta) {
      expect_refused(run_inference("eval", model, tmp),
                     {model + " is a token classification model (" + cls + ") but " +
                      (tmp / "rows.csv") + " holds labelled texts (sequence classification)"},
                     std::string("eval ") + cls);
    }
    const RunResult f = run_inference("forward", model, tmp);
    ASSERT_EQ(f.exit_code, 0) << cls << ": " << f.err;
    EXPECT_EQ(f.err.find("newly initialized"), std::string::npos) << f.err;
    const nlohmann::json logits = nlohmann::json::parse(f.out)["logits"];
    ASSERT_EQ(logits.size(), 1u);     // one sequence
    ASSERT_EQ(logits[0].size(), 4u);  // of 4 tokens
    EXPECT_EQ(logits[0][3].size(), static_cast<std::size_t>(labels)) << cls;
  }
}

TEST(WrongHeadCli, InferenceRefusesBaseModels) {
  TempDir tmp;
  // A BertModel checkpoint: the encoder and its pooler, no classifier.
  const std::string base = tmp / "base";
  init_tiny_model(base, "bert");
  drop_tensors(base, {"classifier."});
  set_architectures(base, {"BertModel"});
  // The same tensors with a config naming no architectures: the tensors decide.
  const std::string unnamed = tmp / "unnamed";
  fs::copy(base, unnamed);
  set_architectures(unnamed, nullptr);
  for (const char* command : kInferenceCommands) {
    expect_refused(run_inference(command, base, tmp),
                   {base + ": config.json's architectures says BertModel", "a base model",
                    "'classifier.weight'", "'classifier.bias'", "2 tensors", "bertfit train"},
                   std::string(command) + " BertModel");
    expect_refused(run_inference(command, unnamed, tmp),
                   {unnamed + "/model.safetensors: the BertForSequenceClassification head is not "
                              "in the checkpoint (2 tensors: 'classifier.weight', "
                              "'classifier.bias')",
                    "names no architectures", "bertfit train"},
                   std::string(command) + " no architectures");
  }
}

// architectures decides even when every tensor a sequence classifier needs is there under its
// name and shape; without architectures the tensors decide.
TEST(WrongHeadCli, ArchitecturesDecidesOverFittingTensorNames) {
  TempDir tmp;
  const std::string m = tmp / "m";
  init_tiny_model(m, "bert");
  set_architectures(m, {"BertForQuestionAnswering"});
  expect_refused(run_inference("predict", m, tmp),
                 // BERT's pooler belongs to the base model: read, not counted.
                 {"architectures says BertForQuestionAnswering",
                  "(2 tensors: 'classifier.weight', 'classifier.bias')"},
                 "predict");
  expect_refused(run_inference("eval", m, tmp), {"question-answering"}, "eval");
  // The golden token classifier as stored (no architectures): its tensors are a token
  // classifier's (a classifier without BERT's pooler, which every sequence classifier has), so
  // it tags words; named a sequence classifier, it is refused for the pooler it lacks.
  const std::string golden = golden_token_classifier(tmp, "bert-tokcls-tiny", nullptr);
  RunResult r = run_inference("predict", golden, tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out.substr(0, r.out.find('\n')))["tags"].size(), 3u) << r.out;
  set_architectures(golden, {"BertForSequenceClassification"});
  expect_refused(run_inference("predict", golden, tmp),
                 {golden + "/model.safetensors: the BertForSequenceClassification head is not in "
                           "the checkpoint (2 tensors: 'bert.pooler.dense.weight', "
                           "'bert.pooler.dense.bias') though config.json's architectures says "
                           "BertForSequenceClassification"},
                 "predict golden");
  // A sequence classifier naming itself, or nothing (its tensors hold both heads' tensors: the
  // config's head, a sequence classifier's, stays), still predicts labels.
  for (const nlohmann::json& a :
       {nlohmann::json{"BertForSequenceClassification"}, nlohmann::json(nullptr)}) {
    set_architectures(m, a);
    r = run_inference("predict", m, tmp);
    EXPECT_EQ(r.exit_code, 0) << a << ": " << r.err;
    EXPECT_EQ(count_of(r.out, "\n"), 2u) << r.out;
    EXPECT_TRUE(nlohmann::json::parse(last_line(r.out)).contains("label")) << r.out;
  }
}

std::string three_class_file(const TempDir& tmp) {
  std::string csv = "text,label\n";
  const char* labels[] = {"sports", "politics", "arts"};
  for (int i = 0; i < 24; ++i) {
    csv += std::string("row ") + std::to_string(i) + " about " + labels[i % 3] + "," +
           labels[i % 3] + "\n";
  }
  write_text(tmp / "three.csv", csv);
  return " --train-file " + (tmp / "three.csv") + " --text-a-column text --label-column label";
}

std::string train_line(const std::string& model, const std::string& out) {
  return "train --model " + model + " --output " + out +
         " --batch-size 8 --max-seq-len 32 --eval-every never --lr 0 --max-steps 2 ";
}

// The golden BertForTokenClassification (9 CoNLL tags) fine-tunes on a 3-class file: the whole
// sequence-classification head is new (the pooler it lacks, a classifier of 3 labels), its
// token classifier's tensors are listed as unused, the labels come from the data.
TEST(WrongHeadCli, TrainStartsANewHeadFromATokenClassifier) {
  TempDir tmp;
  const std::string model =
      golden_token_classifier(tmp, "bert-tokcls-tiny", {"BertForTokenClassification"});
  const RunResult r = run_bertfit(train_line(model, tmp / "out") + three_class_file(tmp));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_of(r.err,
                     "Some weights of BertForSequenceClassification were not initialized "
                     "from the model checkpoint at " +
                         model),
            1u)
      << r.err;
  EXPECT_NE(r.err.find("'bert.pooler.dense.weight', 'bert.pooler.dense.bias', "
                       "'classifier.weight', 'classifier.bias'"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(model + "/model.safetensors: ignoring 2 tensor(s) that a bert sequence "
                               "classifier does not use (config.json's architectures says "
                               "BertForTokenClassification): classifier."),
            std::string::npos)
      << r.err;
  const nlohmann::json c = nlohmann::json::parse(read_text(tmp / "out/config.json"));
  EXPECT_EQ(c["architectures"], nlohmann::json{"BertForSequenceClassification"});
  EXPECT_EQ(c["id2label"], (nlohmann::json{{"0", "arts"}, {"1", "politics"}, {"2", "sports"}}));
  auto trained = tensors_of(tmp / "out/model.safetensors");
  EXPECT_EQ(trained["classifier.weight"].size(), 3u * 16u);
  // The encoder is the checkpoint's (--lr 0).
  auto source = tensors_of(model + "/model.safetensors");
  EXPECT_EQ(trained["bert.encoder.layer.1.output.dense.weight"],
            source["bert.encoder.layer.1.output.dense.weight"]);
  // The trained model is a sequence classifier that predicts.
  const RunResult p = run_bertfit("predict --model " + (tmp / "out") + " --input " +
                                  (tmp / "three.csv") + " --text-a-column text");
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(count_of(p.out, "\n"), 24u);
}

// A token classifier whose classifier has the shape a sequence classifier of its labels would
// want: the classifier is still started anew, not taken from the other head.
TEST(WrongHeadCli, TrainDoesNotTakeAnotherHeadsTensorsOfTheSameShape) {
  TempDir tmp;
  const std::string model = distilbert_token_classifier(tmp);
  write_text(tmp / "two.csv",
             "text,label\na,LABEL_0\nb,LABEL_1\nc,LABEL_0\nd,LABEL_1\ne,LABEL_0\nf,LABEL_1\n");
  const RunResult r = run_bertfit(train_line(model, tmp / "out") + " --train-file " +
                                  (tmp / "two.csv") + " --text-a-column text --label-column label");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("'pre_classifier.weight', 'pre_classifier.bias', 'classifier.weight', "
                       "'classifier.bias'"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("ignoring 2 tensor(s)"), std::string::npos) << r.err;
  auto trained = tensors_of(tmp / "out/model.safetensors");
  auto source = tensors_of(model + "/model.safetensors");
  ASSERT_EQ(trained["classifier.weight"].size(), source["classifier.weight"].size());
  EXPECT_NE(trained["classifier.weight"], source["classifier.weight"]);
}

TEST(WrongHeadCli, ArchitecturesOfAnotherFamilyIsAnError) {
  TempDir tmp;
  const std::string m = tmp / "m";
  init_tiny_model(m, "bert");
  set_architectures(m, {"RobertaForSequenceClassification"});
  const std::string needle = m +
                             "/config.json: key 'architectures' names "
                             "RobertaForSequenceClassification, which is not a Bert* class";
  for (const std::string& args :
       {std::string("predict --model ") + m + " --input " + (tmp / "rows.csv") +
            " --text-a-column text",
        "inspect " + m, train_line(m, tmp / "out") + three_class_file(tmp)}) {
    write_text(tmp / "rows.csv", "text\nsome row\n");
    const RunResult r = run_bertfit(args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(count_of(r.err, "\n"), 1u) << args << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(tmp / "out"));
}

TEST(WrongHeadCli, InspectSaysWhatTheCheckpointIs) {
  TempDir tmp;
  const std::string model =
      golden_token_classifier(tmp, "bert-tokcls-tiny", {"BertForTokenClassification"});
  RunResult r = run_bertfit("inspect " + model);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("arch:          bert (BertForTokenClassification)\n"
                       "head:          token classification\n"),
            std::string::npos)
      << r.out;
  const std::string base = tmp / "base";
  init_tiny_model(base, "bert");
  set_architectures(base, {"BertModel"});
  r = run_bertfit("inspect " + base);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("head:          sequence classification\n"
                       "checkpoint:    BertModel per config.json's architectures: no sequence "
                       "classification head"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace bertfit::testing
