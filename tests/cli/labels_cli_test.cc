// Hugging Face's three problem types through the binary on small data sets made here: a
// one-label model trains as regression on numeric labels with no extra flag and eval scores it;
// a multi-label model learns from JSONL label lists and from comma-separated TSV cells, and
// predict prints every label's probability with the labels over --threshold; a fresh model's
// eval accepts class ids for its default label names; label errors suggest the fix.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "cli_util.h"

namespace bertfit::testing {
namespace {

nlohmann::json last_json(const std::string& out) { return nlohmann::json::parse(last_line(out)); }

std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> lines;
  for (std::size_t p = 0, q; (q = out.find('\n', p)) != std::string::npos; p = q + 1)
    lines.push_back(nlohmann::json::parse(out.substr(p, q - p)));
  return lines;
}

// Two words from a small list per sentence; each word has a sentiment score and a "bad" tag.
struct Word {
  const char* text;
  double score;
};
const std::vector<Word> kWords = {{"good", 4},  {"great", 5}, {"fine", 3},   {"bad", 1},
                                  {"awful", 0}, {"poor", 1},  {"okay", 2.5}, {"nice", 4},
                                  {"grim", 0},  {"superb", 5}};

struct Sentence {
  std::string text;
  double score;
  std::vector<std::string> labels;  // "negative": a word scores < 2; "excellent": one scores 5
};

std::vector<Sentence> sentences(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<Sentence> out;
  for (int i = 0; i < n; ++i) {
    const Word& a = kWords[rng() % kWords.size()];
    const Word& b = kWords[rng() % kWords.size()];
    Sentence s{std::string("this is ") + a.text + " and " + b.text, (a.score + b.score) / 2, {}};
    if (a.score < 2 || b.score < 2) s.labels.push_back("negative");
    if (a.score == 5 || b.score == 5) s.labels.push_back("excellent");
    out.push_back(s);
  }
  return out;
}

void init_small(const std::string& dir, int labels, const std::string& extra = "") {
  RunResult r = run_bertfit("init --arch distilbert --output " + dir + " --num-labels " +
                            std::to_string(labels) +
                            " --set n_layers=1 --set dim=32 --set hidden_dim=64 --set n_heads=2 "
                            "--seed 3 " +
                            extra);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST(LabelsCli, OneLabelModelTrainsAsRegressionOnNumericLabels) {
  TempDir tmp;
  std::string tsv = "text\tscore\n";
  for (const Sentence& s : sentences(300, 1)) tsv += s.text + "\t" + std::to_string(s.score) + "\n";
  write_text(tmp / "reg.tsv", tsv);
  init_small(tmp / "m", 1);
  const std::string data =
      " --dev-file " + (tmp / "reg.tsv") + " --text-a-column text --label-column score";
  RunResult r =
      run_bertfit("train --model " + (tmp / "m") + " --output " + (tmp / "out") + " --train-file " +
                  (tmp / "reg.tsv") + data + " --epochs 3 --batch-size 16 --lr 3e-3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Learns the word scores: a random model's Pearson correlation is near 0.
  EXPECT_GT(last_json(r.out)["eval_pearson"].get<double>(), 0.6) << r.out;
  EXPECT_NE(read_text(tmp / "out/config.json").find("\"regression\""), std::string::npos);
  RunResult e = run_bertfit("eval --model " + (tmp / "out") + data);
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NEAR(last_json(e.out)["eval_pearson"].get<double>(),
              last_json(r.out)["eval_pearson"].get<double>(), 1e-9);
  // predict prints the score.
  write_text(tmp / "two.tsv", "text\nthis is superb and great\nthis is grim and awful\n");
  RunResult p = run_bertfit("predict --model " + (tmp / "out") + " --input " + (tmp / "two.tsv") +
                            " --text-a-column text");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  auto lines = json_lines(p.out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_GT(lines[0]["score"].get<double>(), lines[1]["score"].get<double>());
}

TEST(LabelsCli, FractionalLabelsAreRegressionAndTheErrorSaysHowToTrainSuchAHead) {
  TempDir tmp;
  write_text(tmp / "reg.csv", "text,y\na,0.5\nb,1.25\nc,3\n");
  init_small(tmp / "m2", 2);
  RunResult r = run_bertfit("train --model " + (tmp / "m2") + " --output " + (tmp / "out") +
                            " --train-file " + (tmp / "reg.csv") +
                            " --text-a-column text --label-column y --max-steps 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("regression"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--ignore-mismatched-sizes"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("bertfit init"), std::string::npos) << r.err;
  // A one-label model with class names for labels: the error suggests a classifier.
  write_text(tmp / "cls.csv", "text,y\na,pos\nb,neg\n");
  init_small(tmp / "m1", 1);
  r = run_bertfit("train --model " + (tmp / "m1") + " --output " + (tmp / "out") +
                  " --train-file " + (tmp / "cls.csv") +
                  " --text-a-column text --label-column y --max-steps 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cls.csv:2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--problem-type single_label_classification"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("bertfit init"), std::string::npos) << r.err;
}

// Trains on `train` (JSONL lists or TSV comma cells), then evaluates and predicts.
void check_multi_label(const std::string& format) {
  TempDir tmp;
  std::string text = format == "jsonl" ? "" : "text\tlabels\n";
  for (const Sentence& s : sentences(300, 2)) {
    if (format == "jsonl") {
      text += nlohmann::json{{"text", s.text}, {"labels", s.labels}}.dump() + "\n";
    } else {
      std::string cell;
      for (const auto& l : s.labels) cell += (cell.empty() ? "" : ",") + l;
      text += s.text + "\t" + cell + "\n";
    }
  }
  const std::string file = tmp / ("ml." + format);
  write_text(file, text);
  // JSON lists make a multi-label task by themselves; TSV cells need the model to say so.
  init_small(tmp / "m", 2,
             format == "jsonl" ? "" : "--set problem_type=multi_label_classification");
  const std::string data = " --dev-file " + file + " --text-a-column text --label-column labels";
  RunResult r =
      run_bertfit("train --model " + (tmp / "m") + " --output " + (tmp / "out") + " --train-file " +
                  file + data + " --epochs 15 --batch-size 16 --lr 3e-3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json summary = last_json(r.out);
  // Rows with no label: neither word negative (0.6²) nor excellent (0.8²), ≈ 0.23; predicting
  // none gives that subset accuracy and micro-F1 0. Learning the word lists gives far more.
  EXPECT_GT(summary["eval_f1_micro"].get<double>(), 0.8) << r.out;
  EXPECT_GT(summary["eval_subset_accuracy"].get<double>(), 0.6) << r.out;
  EXPECT_TRUE(summary.contains("eval_f1_macro"));
  EXPECT_NE(read_text(tmp / "out/config.json").find("multi_label_classification"),
            std::string::npos);
  RunResult e = run_bertfit("eval --model " + (tmp / "out") + data);
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NEAR(last_json(e.out)["eval_f1_micro"].get<double>(),
              summary["eval_f1_micro"].get<double>(), 1e-9);

  write_text(tmp / "p.tsv", "text\nthis is grim and superb\nthis is good and nice\n");
  for (const char* threshold : {"0.5", "1"}) {
    RunResult p = run_bertfit("predict --model " + (tmp / "out") + " --input " + (tmp / "p.tsv") +
                              " --text-a-column text --threshold " + threshold);
    ASSERT_EQ(p.exit_code, 0) << p.err;
    auto lines = json_lines(p.out);
    ASSERT_EQ(lines.size(), 2u);
    for (const auto& line : lines) {
      ASSERT_TRUE(line["probabilities"].contains("negative")) << line;
      ASSERT_TRUE(line["probabilities"].contains("excellent")) << line;
    }
    // The labels are exactly those over the threshold, in id order (sorted names).
    for (const auto& line : lines) {
      nlohmann::json over = nlohmann::json::array();
      for (const char* name : {"excellent", "negative"})
        if (line["probabilities"][name].get<double>() > std::stod(threshold)) over.push_back(name);
      EXPECT_EQ(line["labels"], over) << line;
    }
    EXPECT_GT(lines[0]["probabilities"]["excellent"].get<double>(),
              lines[1]["probabilities"]["excellent"].get<double>());
    if (std::string(threshold) == "1") {
      EXPECT_TRUE(lines[0]["labels"].empty());
    }
  }
}

TEST(LabelsCli, MultiLabelFromJsonlLists) { check_multi_label("jsonl"); }
TEST(LabelsCli, MultiLabelFromTsvCommaCells) { check_multi_label("tsv"); }

TEST(LabelsCli, MultiLabelCountMismatchSuggestsANewHead) {
  TempDir tmp;
  write_text(tmp / "ml.jsonl",
             "{\"t\": \"a\", \"l\": [\"x\", \"y\"]}\n{\"t\": \"b\", \"l\": [\"z\"]}\n");
  init_small(tmp / "m", 2);
  RunResult r =
      run_bertfit("train --model " + (tmp / "m") + " --output " + (tmp / "out") + " --train-file " +
                  (tmp / "ml.jsonl") + " --text-a-column t --label-column l --max-steps 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("multi_label_classification over 3 labels"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--ignore-mismatched-sizes"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp / "out"));
}

TEST(LabelsCli, FreshModelEvalAcceptsClassIdsForDefaultNames) {
  TempDir tmp;
  init_small(tmp / "m", 2);
  write_text(tmp / "d.tsv", "text\tlabel\na b\t0\nc d\t1\ne f\tLABEL_1\n");
  const std::string base = "eval --model " + (tmp / "m") + " --dev-file " + (tmp / "d.tsv") +
                           " --text-a-column text --label-column label";
  RunResult r = run_bertfit(base);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(last_json(r.out)["examples"], 3);
  write_text(tmp / "d.tsv", "text\tlabel\na b\t2\n");
  r = run_bertfit(base);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("d.tsv:2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("class id 0..1"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace bertfit::testing
