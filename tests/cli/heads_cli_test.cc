// Heads sized from the data, as run_glue: a base checkpoint (no classifier, no label names, as
// every Hub base model) fine-tunes on regression (STS-B), a 3-class file and a multi-label file
// with a new head said once on stderr and its encoder weights kept; a trained head of another
// size is refused unless --ignore-mismatched-sizes; --num-labels, --labels and --problem-type
// decide the head; a model's own label order is kept, and a data label it lacks is an error.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"
#include "io/safetensors.h"

namespace bertfit::testing {
namespace {

namespace fs = std::filesystem;

std::string glue(const std::string& task) { return shared_dir() + "/data/glue/" + task; }

nlohmann::json last_json(const std::string& out) { return nlohmann::json::parse(last_line(out)); }

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

std::vector<std::int64_t> shape_of(const std::string& path, const std::string& name) {
  SafetensorsFile f = SafetensorsFile::open(path);
  const TensorInfo* t = f.find(name);
  return t ? t->shape.dims : std::vector<std::int64_t>{};
}

nlohmann::json config_of(const std::string& dir) {
  return nlohmann::json::parse(read_text(dir + "/config.json"));
}

// A base checkpoint as the Hub has them: `bertfit init` without the head's tensors
// (classifier; DistilBERT's pre_classifier too, BERT keeps its pooler), names without the
// model prefix, and a config.json without label keys.
void make_base_model(const std::string& dir, const std::string& arch) {
  init_tiny_model(dir, arch);
  const std::string weights = dir + "/model.safetensors";
  const std::string prefix = arch + ".";
  std::map<std::string, std::vector<float>> all = tensors_of(weights);
  SafetensorsFile f = SafetensorsFile::open(weights);
  std::vector<TensorToWrite> kept;
  std::vector<std::string> names;
  names.reserve(all.size());
  for (const TensorInfo& t : f.tensors()) {
    if (t.name.rfind(prefix, 0) != 0) continue;  // the head
    names.push_back(t.name.substr(prefix.size()));
    kept.push_back({names.back(), t.dtype, t.shape, all[t.name].data()});
  }
  write_safetensors(weights + ".new", kept);
  fs::rename(weights + ".new", weights);
  nlohmann::json config = config_of(dir);
  for (const char* key : {"id2label", "label2id", "num_labels", "problem_type"}) config.erase(key);
  write_text(dir + "/config.json", config.dump(2));
}

// The encoder tensors of `trained` (prefixed names) equal the base checkpoint's, bit for bit.
void expect_encoder_kept(const std::string& base_dir, const std::string& trained_dir,
                         const std::string& arch) {
  auto base = tensors_of(base_dir + "/model.safetensors");
  auto trained = tensors_of(trained_dir + "/model.safetensors");
  int compared = 0;
  for (const auto& [name, values] : base) {
    const std::string full = arch + "." + name;  // the base checkpoint's names lack the prefix
    ASSERT_TRUE(trained.count(full)) << full;
    EXPECT_EQ(trained[full], values) << full;
    ++compared;
  }
  EXPECT_GT(compared, 10);
}

std::string train_line(const std::string& model, const std::string& out) {
  return "train --model " + model + " --output " + out +
         " --batch-size 8 --max-seq-len 32 --eval-every never --log-every 1 ";
}

TEST(HeadsCli, BaseCheckpointFineTunesOnStsbAsRegression) {
  TempDir tmp;
  make_base_model(tmp / "base", "bert");
  RunResult r = run_bertfit(train_line(tmp / "base", tmp / "out") + "--task stsb --data " +
                            glue("STS-B") + " --max-steps 2 --lr 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // transformers' words, once, naming the new tensors.
  EXPECT_EQ(count_of(r.err, "were not initialized from the model checkpoint"), 1u) << r.err;
  EXPECT_NE(r.err.find("'classifier.weight'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("You should probably TRAIN this model"), std::string::npos) << r.err;
  const nlohmann::json c = config_of(tmp / "out");
  EXPECT_EQ(c["problem_type"], "regression");
  EXPECT_EQ(c["id2label"].size(), 1u) << c.dump();
  EXPECT_EQ(shape_of(tmp / "out/model.safetensors", "classifier.weight"),
            (std::vector<std::int64_t>{1, 32}));
  expect_encoder_kept(tmp / "base", tmp / "out", "bert");
  // The trained model evaluates as regression on STS-B.
  RunResult e = run_bertfit("eval --model " + (tmp / "out") + " --task stsb --data " +
                            glue("STS-B") + " --max-seq-len 32");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_TRUE(last_json(e.out).contains("eval_pearson")) << e.out;
}

std::string three_class_file(const TempDir& tmp) {
  std::string csv = "text,label\n";
  const char* labels[] = {"sports", "politics", "arts"};
  for (int i = 0; i < 30; ++i) {
    csv += std::string("row ") + std::to_string(i) + " about " + labels[i % 3] + "," +
           labels[i % 3] + "\n";
  }
  write_text(tmp / "three.csv", csv);
  return " --train-file " + (tmp / "three.csv") + " --text-a-column text --label-column label";
}

TEST(HeadsCli, BaseCheckpointFineTunesOnAThreeClassFile) {
  TempDir tmp;
  make_base_model(tmp / "base", "distilbert");
  RunResult r = run_bertfit(train_line(tmp / "base", tmp / "out") + three_class_file(tmp) +
                            " --max-steps 2 --lr 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_of(r.err, "were not initialized from the model checkpoint"), 1u) << r.err;
  EXPECT_NE(r.err.find("'pre_classifier.weight'"), std::string::npos) << r.err;
  const nlohmann::json c = config_of(tmp / "out");
  EXPECT_EQ(c["id2label"], (nlohmann::json{{"0", "arts"}, {"1", "politics"}, {"2", "sports"}}));
  EXPECT_EQ(c["problem_type"], "single_label_classification");
  EXPECT_EQ(shape_of(tmp / "out/model.safetensors", "classifier.weight"),
            (std::vector<std::int64_t>{3, 32}));
  expect_encoder_kept(tmp / "base", tmp / "out", "distilbert");
}

TEST(HeadsCli, BaseCheckpointFineTunesOnAMultiLabelFile) {
  TempDir tmp;
  make_base_model(tmp / "base", "bert");
  std::string jsonl;
  for (int i = 0; i < 20; ++i) {
    nlohmann::json labels = nlohmann::json::array();
    if (i % 2) labels.push_back("toxic");
    if (i % 3 == 0) labels.push_back("insult");
    if (i % 5 == 0) labels.push_back("threat");
    jsonl +=
        nlohmann::json{{"text", "comment " + std::to_string(i)}, {"labels", labels}}.dump() + "\n";
  }
  write_text(tmp / "ml.jsonl", jsonl);
  RunResult r =
      run_bertfit(train_line(tmp / "base", tmp / "out") + " --train-file " + (tmp / "ml.jsonl") +
                  " --text-a-column text --label-column labels --max-steps 2 --lr 1e-3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json c = config_of(tmp / "out");
  EXPECT_EQ(c["problem_type"], "multi_label_classification");
  EXPECT_EQ(c["id2label"], (nlohmann::json{{"0", "insult"}, {"1", "threat"}, {"2", "toxic"}}));
  EXPECT_EQ(shape_of(tmp / "out/model.safetensors", "classifier.weight"),
            (std::vector<std::int64_t>{3, 32}));
}

TEST(HeadsCli, TrainedHeadOfAnotherSizeIsRefusedUnlessIgnoreMismatchedSizes) {
  TempDir tmp;
  init_tiny_model(tmp / "m", "distilbert", 2);
  const std::string data = three_class_file(tmp) + " --max-steps 1 --lr 0";
  RunResult r = run_bertfit(train_line(tmp / "m", tmp / "out") + data);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("classifier has 2 outputs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--ignore-mismatched-sizes"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("bertfit init"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "out"));
  // STS-B the same: no advice to throw the weights away.
  r = run_bertfit(train_line(tmp / "m", tmp / "out") + "--task stsb --data " + glue("STS-B") +
                  " --max-steps 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--ignore-mismatched-sizes"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("bertfit init"), std::string::npos) << r.err;

  r = run_bertfit(train_line(tmp / "m", tmp / "out") + data + " --ignore-mismatched-sizes");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("shapes did not match"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[2, 32]"), std::string::npos) << r.err;
  EXPECT_EQ(shape_of(tmp / "out/model.safetensors", "classifier.weight"),
            (std::vector<std::int64_t>{3, 32}));
  // Everything but the classifier is the model's (pre_classifier included).
  auto before = tensors_of(tmp / "m/model.safetensors");
  auto after = tensors_of(tmp / "out/model.safetensors");
  for (const auto& [name, values] : before) {
    if (name.rfind("classifier.", 0) == 0) continue;
    EXPECT_EQ(after[name], values) << name;
  }
}

TEST(HeadsCli, LabelsNumLabelsAndProblemTypeDecideTheHead) {
  TempDir tmp;
  make_base_model(tmp / "base", "distilbert");
  // --labels: their order becomes the ids.
  RunResult r = run_bertfit(train_line(tmp / "base", tmp / "a") + three_class_file(tmp) +
                            " --max-steps 1 --labels sports,arts,politics");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(config_of(tmp / "a")["id2label"],
            (nlohmann::json{{"0", "sports"}, {"1", "arts"}, {"2", "politics"}}));
  // A data label missing from --labels is named with its line.
  r = run_bertfit(train_line(tmp / "base", tmp / "b") + three_class_file(tmp) +
                  " --max-steps 1 --labels sports,arts");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("three.csv:3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'politics'"), std::string::npos) << r.err;
  // --num-labels that disagrees with --labels.
  r = run_bertfit(train_line(tmp / "base", tmp / "b") + three_class_file(tmp) +
                  " --max-steps 1 --num-labels 4 --labels sports,arts,politics");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--num-labels 4"), std::string::npos) << r.err;
  // --num-labels K with class ids 0..K-1 in the data: K classes, one not in the file.
  write_text(tmp / "ids.tsv", "text\tlabel\na b\t0\nc d\t1\ne f\t0\n");
  const std::string ids = " --train-file " + (tmp / "ids.tsv") +
                          " --text-a-column text --label-column label --max-steps 1";
  r = run_bertfit(train_line(tmp / "base", tmp / "c") + ids + " --num-labels 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(config_of(tmp / "c")["id2label"].size(), 3u);
  EXPECT_EQ(shape_of(tmp / "c/model.safetensors", "classifier.weight"),
            (std::vector<std::int64_t>{3, 32}));
  // --problem-type regression reads integer labels as numbers.
  r = run_bertfit(train_line(tmp / "base", tmp / "d") + ids + " --problem-type regression");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(config_of(tmp / "d")["problem_type"], "regression");
  // --problem-type multi_label_classification reads the cells as lists.
  r = run_bertfit(train_line(tmp / "base", tmp / "e") + ids +
                  " --problem-type multi_label_classification");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(config_of(tmp / "e")["problem_type"], "multi_label_classification");
  // A word --problem-type does not know is named.
  r = run_bertfit(train_line(tmp / "base", tmp / "f") + ids + " --problem-type ordinal");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--problem-type"), std::string::npos) << r.err;
  // --problem-type that contradicts a GLUE task.
  r = run_bertfit(train_line(tmp / "base", tmp / "g") + "--task stsb --data " + glue("STS-B") +
                  " --max-steps 1 --problem-type single_label_classification");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("stsb"), std::string::npos) << r.err;
}

TEST(HeadsCli, SingleValueLabelColumnNamesTheLabelsFlag) {
  TempDir tmp;
  make_base_model(tmp / "base", "distilbert");
  write_text(tmp / "one.tsv", "text\tlabel\na b\tyes\nc d\tyes\n");
  RunResult r =
      run_bertfit(train_line(tmp / "base", tmp / "out") + " --train-file " + (tmp / "one.tsv") +
                  " --text-a-column text --label-column label --max-steps 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--labels"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("give the label list"), std::string::npos) << r.err;
  r = run_bertfit(train_line(tmp / "base", tmp / "out") + " --train-file " + (tmp / "one.tsv") +
                  " --text-a-column text --label-column label --max-steps 1 --labels yes,no");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(config_of(tmp / "out")["id2label"], (nlohmann::json{{"0", "yes"}, {"1", "no"}}));
}

TEST(HeadsCli, ModelLabelOrderIsKeptAndAnUnknownLabelIsNamed) {
  TempDir tmp;
  RunResult r = run_bertfit("init --arch distilbert --output " + (tmp / "m") +
                            " --set n_layers=1 --set dim=32 --set hidden_dim=64 --set n_heads=2 "
                            "--set 'id2label={\"0\": \"positive\", \"1\": \"negative\"}' "
                            "--set 'label2id={\"positive\": 0, \"negative\": 1}'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  write_text(tmp / "d.tsv", "text\tlabel\ngood\tpositive\nbad\tnegative\nfine\tpositive\n");
  const std::string data = " --train-file " + (tmp / "d.tsv") +
                           " --text-a-column text --label-column label --max-steps 1 --lr 0";
  r = run_bertfit(train_line(tmp / "m", tmp / "out") + data);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(config_of(tmp / "out")["id2label"],
            (nlohmann::json{{"0", "positive"}, {"1", "negative"}}));
  // The head is the model's: lr 0 leaves every tensor as it was.
  EXPECT_EQ(tensors_of(tmp / "out/model.safetensors"), tensors_of(tmp / "m/model.safetensors"));
  EXPECT_EQ(r.err.find("were not initialized"), std::string::npos) << r.err;

  write_text(tmp / "d.tsv", "text\tlabel\ngood\tpositive\nmeh\tneutral\n");
  r = run_bertfit(train_line(tmp / "m", tmp / "out2") + data);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("d.tsv:3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'neutral'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--labels"), std::string::npos) << r.err;
}

TEST(HeadsCli, GlueModelInAnotherLabelOrderKeepsItThroughTrainAndEval) {
  TempDir tmp;
  RunResult r = run_bertfit(
      "init --arch distilbert --output " + (tmp / "m") +
      " --set n_layers=1 --set dim=32 --set hidden_dim=64 --set n_heads=2 "
      "--set 'id2label={\"0\": \"1\", \"1\": \"0\"}' --set 'label2id={\"1\": 0, \"0\": 1}'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_bertfit(train_line(tmp / "m", tmp / "out") + "--task sst2 --data " + glue("SST-2") +
                  " --max-steps 1 --lr 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(config_of(tmp / "out")["id2label"], (nlohmann::json{{"0", "1"}, {"1", "0"}}));
  // eval scores the model's predictions under its own names: the accuracy equals the share of
  // dev rows whose predicted label name (predict) is the gold label.
  RunResult e = run_bertfit("eval --model " + (tmp / "m") + " --task sst2 --data " + glue("SST-2") +
                            " --max-seq-len 32");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  RunResult p = run_bertfit("predict --model " + (tmp / "m") + " --input " + glue("SST-2") +
                            "/dev.tsv --text-a-column sentence --max-seq-len 32");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const std::string dev = read_text(glue("SST-2") + "/dev.tsv");
  std::vector<std::string> gold;
  for (std::size_t a = dev.find('\n') + 1, b; (b = dev.find('\n', a)) != std::string::npos;
       a = b + 1) {
    gold.push_back(dev.substr(dev.rfind('\t', b) + 1, b - dev.rfind('\t', b) - 1));
  }
  int right = 0, n = 0;
  for (std::size_t a = 0, b; (b = p.out.find('\n', a)) != std::string::npos; a = b + 1, ++n) {
    nlohmann::json line = nlohmann::json::parse(p.out.substr(a, b - a));
    right += line["label_name"] == gold.at(n) ? 1 : 0;
  }
  ASSERT_EQ(static_cast<std::size_t>(n), gold.size());
  EXPECT_NEAR(last_json(e.out)["eval_accuracy"].get<double>(), static_cast<double>(right) / n,
              1e-12);
}

}  // namespace
}  // namespace bertfit::testing
