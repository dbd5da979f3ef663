// Tests of the GLUE task table and split loading: every task folder present under
// shared/data/glue (row counts, label counts and first rows from shared/data/PROVENANCE.md), and
// synthetic MNLI and WNLI folders written to a temporary directory, plus the error messages.
#include "data/glue.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "base/error.h"
#include "base/file.h"
#include "tests/util/errors.h"

namespace bertfit {
namespace {

const std::string kGlue = std::string(BERTFIT_SHARED_DIR) + "/data/glue";

using testing::error_of;

// Loads kGlue/<folder>/<split>, skipping the test when the folder is absent.
#define LOAD_OR_SKIP(var, task, folder, split)                                           \
  if (!is_directory(kGlue + "/" folder)) GTEST_SKIP() << kGlue << "/" folder " missing"; \
  LoadedExamples var = load_glue_split(task, kGlue + "/" folder, split)

std::map<float, int> label_counts(const LoadedExamples& loaded) {
  std::map<float, int> counts;
  for (const auto& ex : loaded.examples) counts[ex.label] += 1;
  return counts;
}

double mean_label(const LoadedExamples& loaded) {
  double sum = 0;
  for (const auto& ex : loaded.examples) sum += ex.label;
  return sum / static_cast<double>(loaded.examples.size());
}

TEST(GlueTable, TasksAndLookup) {
  EXPECT_EQ(glue_tasks().size(), 9u);
  EXPECT_EQ(find_glue_task("SST-2").name, "sst2");
  EXPECT_EQ(find_glue_task("sts_b").name, "stsb");
  EXPECT_EQ(find_glue_task("CoLA").folder, "CoLA");
  const GlueTask& mnli = find_glue_task("mnli");
  EXPECT_EQ(mnli.labels, (std::vector<std::string>{"entailment", "neutral", "contradiction"}));
  EXPECT_EQ(mnli.eval_splits, (std::vector<std::string>{"dev_matched", "dev_mismatched"}));
  EXPECT_EQ(find_glue_task("stsb").num_labels(), 1);
  EXPECT_TRUE(find_glue_task("stsb").is_regression);
  EXPECT_EQ(find_glue_task("mrpc").metrics, (std::vector<std::string>{"accuracy", "f1"}));
  EXPECT_EQ(find_glue_task("cola").metrics, (std::vector<std::string>{"matthews_correlation"}));
  EXPECT_FALSE(find_glue_task("sst2").has_text_b());
  EXPECT_TRUE(find_glue_task("qnli").has_text_b());
  EXPECT_NE(error_of([] { find_glue_task("squad"); }).find("known tasks: cola, sst2"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              find_glue_split(find_glue_task("mnli"), "dev");
            }).find("splits: train, dev_matched, dev_mismatched"),
            std::string::npos);
}

TEST(GlueData, Mrpc) {
  LOAD_OR_SKIP(train, "mrpc", "MRPC", "train");
  EXPECT_EQ(train.examples.size(), 3668u);
  EXPECT_EQ(label_counts(train)[1.0f], 2474);
  LoadedExamples dev = load_glue_split("mrpc", kGlue + "/MRPC", "dev");
  ASSERT_EQ(dev.examples.size(), 408u);
  EXPECT_EQ(label_counts(dev)[1.0f], 279);
  const Example& first = dev.examples[0];
  EXPECT_EQ(first.text_a,
            "He said the foodservice pie business doesn't fit the company's long-term growth "
            "strategy.");
  EXPECT_EQ(*first.text_b,
            "\"The foodservice pie business does not fit our long-term growth "
            "strategy.");  // leading quote kept: TAB-only splitting
  EXPECT_EQ(first.label, 1.0f);
  EXPECT_EQ(first.line, 2);
  LoadedExamples test = load_glue_split("mrpc", kGlue + "/MRPC", "test");
  EXPECT_EQ(test.examples.size(), 1725u);
  EXPECT_FALSE(test.examples[0].has_label);
  EXPECT_TRUE(dev.examples[0].has_label);
}

TEST(GlueData, Sst2) {
  LOAD_OR_SKIP(dev, "sst2", "SST-2", "dev");
  ASSERT_EQ(dev.examples.size(), 872u);
  EXPECT_EQ(label_counts(dev)[1.0f], 444);
  EXPECT_EQ(dev.examples[0].text_a, "it 's a charming and often affecting journey . ");
  EXPECT_FALSE(dev.examples[0].text_b.has_value());
  LoadedExamples train = load_glue_split("sst2", kGlue + "/SST-2", "train");
  EXPECT_EQ(train.examples.size(), 67349u);
  EXPECT_EQ(label_counts(train)[1.0f], 37569);
  LoadedExamples test = load_glue_split("sst2", kGlue + "/SST-2", "test");
  EXPECT_EQ(test.examples.size(), 1821u);
}

TEST(GlueData, Cola) {
  LOAD_OR_SKIP(train, "cola", "CoLA", "train");
  ASSERT_EQ(train.examples.size(), 8551u);
  EXPECT_EQ(label_counts(train)[1.0f], 6023);
  EXPECT_EQ(train.examples[0].text_a,
            "Our friends won't buy this analysis, let alone the next one we propose.");
  EXPECT_EQ(train.examples[0].line, 1);  // no header
  LoadedExamples dev = load_glue_split("cola", kGlue + "/CoLA", "dev");
  ASSERT_EQ(dev.examples.size(), 1043u);
  EXPECT_EQ(label_counts(dev)[1.0f], 721);
  EXPECT_EQ(label_counts(dev)[0.0f], 322);
  EXPECT_EQ(dev.examples.back().text_a, "John talked to Bill about himself.");  // no final \n
  EXPECT_EQ(load_glue_split("cola", kGlue + "/CoLA", "test").examples.size(), 1063u);
}

TEST(GlueData, Rte) {
  LOAD_OR_SKIP(dev, "rte", "RTE", "dev");
  ASSERT_EQ(dev.examples.size(), 277u);
  EXPECT_EQ(label_counts(dev)[0.0f], 146);  // entailment
  EXPECT_EQ(label_counts(dev)[1.0f], 131);  // not_entailment
  EXPECT_EQ(*dev.examples[0].text_b, "Christopher Reeve had an accident.");
  EXPECT_EQ(dev.examples[0].label, 1.0f);
  LoadedExamples train = load_glue_split("rte", kGlue + "/RTE", "train");
  EXPECT_EQ(train.examples.size(), 2490u);
  EXPECT_EQ(label_counts(train)[0.0f], 1249);
}

TEST(GlueData, Stsb) {
  LOAD_OR_SKIP(dev, "stsb", "STS-B", "dev");
  ASSERT_EQ(dev.examples.size(), 1500u);
  EXPECT_EQ(dev.examples[0].text_a, "A man with a hard hat is dancing.");
  EXPECT_EQ(*dev.examples[0].text_b, "A man wearing a hard hat is dancing.");
  EXPECT_EQ(dev.examples[0].label, 5.0f);
  EXPECT_EQ(dev.examples[1].label, 4.75f);
  EXPECT_NEAR(mean_label(dev), 2.364, 5e-4);  // PROVENANCE: dev mean 2.364
  LoadedExamples train = load_glue_split("stsb", kGlue + "/STS-B", "train");
  EXPECT_EQ(train.examples.size(), 5749u);
  EXPECT_NEAR(mean_label(train), 2.701, 5e-4);
  EXPECT_EQ(load_glue_split("stsb", kGlue + "/STS-B", "test").examples.size(), 1379u);
}

TEST(GlueData, Qnli) {
  LOAD_OR_SKIP(dev, "qnli", "QNLI", "dev");
  ASSERT_EQ(dev.examples.size(), 5463u);
  EXPECT_EQ(label_counts(dev)[0.0f], 2702);
  EXPECT_EQ(label_counts(dev)[1.0f], 2761);
  EXPECT_EQ(dev.examples[0].text_a, "What came into force after the new constitution was herald?");
}

TEST(GlueData, QqpSubsetSkipsTheDamagedFirstRow) {
  LOAD_OR_SKIP(subset, "qqp", "QQP", "train_subset");
  // 23497 lines: the first has 5 fields (label joined by a space), the other 23496 are rows.
  EXPECT_EQ(subset.examples.size(), 23496u);
  EXPECT_EQ(subset.skipped_rows, 1);
  EXPECT_EQ(label_counts(subset)[0.0f], 14749);
  EXPECT_EQ(label_counts(subset)[1.0f], 8747);
  EXPECT_EQ(subset.examples[0].text_a, "What causes stool color to change to yellow?");
  EXPECT_EQ(subset.examples[0].line, 2);
  // Without the task's skipping, the reader reports the damaged row.
  TableOptions strict;
  strict.header = false;
  std::string msg = error_of([&] {
    read_columns(kGlue + "/QQP/train_subset.tsv", {"3", "4", "5"}, strict);
  });
  EXPECT_NE(msg.find("train_subset.tsv:1: row has 5 field(s) but column '5' needs at least 6"),
            std::string::npos)
      << msg;
}

class SyntheticGlue : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("bertfit_glue_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name) << content;
  }
  std::string dir() const { return dir_.string(); }
  std::filesystem::path dir_;
};

constexpr const char* kMnliTrainHeader =
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
    "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n";
constexpr const char* kMnliDevHeader =
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
    "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\t"
    "label5\tgold_label\n";

TEST_F(SyntheticGlue, Mnli) {
  write("train.tsv", std::string(kMnliTrainHeader) +
                         "0\t1\t1n\tgov\t( a )\t( b )\t(S a)\t(S b)\tPremise one.\tHypo one.\t"
                         "neutral\tneutral\n"
                         "1\t2\t2c\tgov\t-\t-\t-\t-\tPremise two.\tHypo two.\tcontradiction\t"
                         "contradiction\n");
  write("dev_matched.tsv", std::string(kMnliDevHeader) +
                               "0\t1\t1e\tfic\t-\t-\t-\t-\tP.\tH.\tentailment\tentailment\t"
                               "neutral\tentailment\tentailment\tentailment\n");
  write("dev_mismatched.tsv", std::string(kMnliDevHeader) +
                                  "0\t1\t1e\tfic\t-\t-\t-\t-\tP.\tH.\tneutral\t-\t-\t-\t-\t"
                                  "unknown_label\n");
  write("test_matched.tsv",
        "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
        "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\n0\t1\t1\tg\t-\t-\t-\t-\tX.\tY.\n");
  LoadedExamples train = load_glue_split("mnli", dir(), "train");
  ASSERT_EQ(train.examples.size(), 2u);
  EXPECT_EQ(train.examples[0].text_a, "Premise one.");
  EXPECT_EQ(*train.examples[0].text_b, "Hypo one.");
  EXPECT_EQ(train.examples[0].label, 1.0f);  // neutral
  EXPECT_EQ(train.examples[1].label, 2.0f);  // contradiction
  LoadedExamples dev = load_glue_split("mnli", dir(), "dev_matched");
  ASSERT_EQ(dev.examples.size(), 1u);
  EXPECT_EQ(dev.examples[0].label, 0.0f);  // entailment (from gold_label, the last column)
  std::string msg = error_of([&] { load_glue_split("mnli", dir(), "dev_mismatched"); });
  EXPECT_NE(msg.find("dev_mismatched.tsv:2: label 'unknown_label' in column 'gold_label' is not "
                     "one of the allowed labels 'entailment', 'neutral', 'contradiction'"),
            std::string::npos)
      << msg;
  LoadedExamples test = load_glue_split("mnli", dir(), "test_matched");
  ASSERT_EQ(test.examples.size(), 1u);
  EXPECT_FALSE(test.examples[0].has_label);
  EXPECT_EQ(*test.examples[0].text_b, "Y.");
  msg = error_of([&] { load_glue_split("mnli", dir(), "test_mismatched"); });
  EXPECT_NE(msg.find((dir_ / "test_mismatched.tsv").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("should contain train.tsv, dev_matched.tsv, dev_mismatched.tsv"),
            std::string::npos)
      << msg;
}

TEST_F(SyntheticGlue, Wnli) {
  write("train.tsv", "index\tsentence1\tsentence2\tlabel\n0\tA b.\tC d.\t1\n1\tE.\tF.\t0\n");
  write("dev.tsv", "index\tsentence1\tsentence2\tlabel\n0\tG.\tH.\t2\n");
  write("test.tsv", "index\tsentence1\tsentence2\n0\tI.\tJ.\n");
  LoadedExamples train = load_glue_split("wnli", dir(), "train");
  ASSERT_EQ(train.examples.size(), 2u);
  EXPECT_EQ(train.examples[0].label, 1.0f);
  EXPECT_EQ(train.examples[1].text_a, "E.");
  std::string msg = error_of([&] { load_glue_split("wnli", dir(), "dev"); });
  EXPECT_NE(msg.find("dev.tsv:2: label '2'"), std::string::npos) << msg;
  EXPECT_EQ(load_glue_split("wnli", dir(), "test").examples[0].text_a, "I.");
}

TEST_F(SyntheticGlue, StsbBadScoreAndEmptySplit) {
  std::string header =
      "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n";
  write("train.tsv",
        header + "0\tg\tf\t2012\t1\tn\tn\tA.\tB.\t3.5\n1\tg\tf\t2012\t2\tn\tn\tC.\tD.\thigh\n");
  write("dev.tsv", header);
  std::string msg = error_of([&] { load_glue_split("stsb", dir(), "train"); });
  EXPECT_NE(msg.find("train.tsv:3: regression label 'high' in column 'score' is not a finite"),
            std::string::npos)
      << msg;
  msg = error_of([&] { load_glue_split("stsb", dir(), "dev"); });
  EXPECT_NE(msg.find("has a header line but no data rows"), std::string::npos) << msg;
}

TEST_F(SyntheticGlue, MalformedRowsFailUnlessSkipped) {
  write("train.tsv", "sentence\tlabel\ngood one\t1\nno label here\nbad too\t0\n");
  std::string msg = error_of([&] { load_glue_split("sst2", dir(), "train"); });
  EXPECT_NE(msg.find("train.tsv:3: row has 1 field(s) but column 'label' needs at least 2"),
            std::string::npos)
      << msg;
  GlueLoadOptions skip;
  skip.skip_malformed = true;
  LoadedExamples loaded = load_glue_split("sst2", dir(), "train", skip);
  EXPECT_EQ(loaded.examples.size(), 2u);
  EXPECT_EQ(loaded.skipped_rows, 1);
  EXPECT_EQ(loaded.examples[1].line, 4);
}

}  // namespace
}  // namespace bertfit
