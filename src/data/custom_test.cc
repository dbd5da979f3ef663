// Tests of load_custom_file: TSV/CSV/JSONL files with chosen columns, label lists collected from
// the train file (bytewise or numeric order) and reused for the dev file, regression labels,
// unlabeled files and errors.
#include "data/custom.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "tests/util/errors.h"

namespace bertfit {
namespace {

using testing::error_of;

class CustomFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("bertfit_custom_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name) << content;
    return (dir_ / name).string();
  }
  std::filesystem::path dir_;
};

std::vector<float> labels_of(const LoadedExamples& loaded) {
  std::vector<float> out;
  for (const auto& ex : loaded.examples) out.push_back(ex.label);
  return out;
}

TEST_F(CustomFile, CsvPairWithCollectedLabelsReusedForDev) {
  std::string train = write("train.csv",
                            "premise,hypothesis,label\n"
                            "\"A, b\",C,pos\nD,E,neg\nF,G,neutral\nH,I,pos\n");
  std::string dev = write("dev.csv", "premise,hypothesis,label\nJ,K,neg\nL,M,other\n");
  ColumnSpec cols{"premise", "hypothesis", "label"};
  LoadedExamples tr = load_custom_file(train, cols);
  EXPECT_EQ(tr.label_names, (std::vector<std::string>{"neg", "neutral", "pos"}));  // sorted
  EXPECT_EQ(labels_of(tr), (std::vector<float>{2, 0, 1, 2}));
  EXPECT_EQ(tr.examples[0].text_a, "A, b");
  EXPECT_EQ(*tr.examples[0].text_b, "C");
  CustomFileOptions dev_options;
  dev_options.label_names = tr.label_names;
  std::string msg = error_of([&] { load_custom_file(dev, cols, dev_options); });
  EXPECT_NE(msg.find("dev.csv:3: label 'other' in column 'label' is not one of the allowed "
                     "labels 'neg', 'neutral', 'pos'"),
            std::string::npos)
      << msg;
}

TEST_F(CustomFile, IntegerLabelsSortNumerically) {
  std::string path = write("d.tsv", "text\tlabel\na\t10\nb\t2\nc\t1\nd\t2\n");
  LoadedExamples loaded = load_custom_file(path, {"text", std::nullopt, "label"});
  EXPECT_EQ(loaded.label_names, (std::vector<std::string>{"1", "2", "10"}));
  EXPECT_EQ(labels_of(loaded), (std::vector<float>{2, 1, 0, 1}));
  EXPECT_FALSE(loaded.examples[0].text_b.has_value());
}

TEST_F(CustomFile, JsonlRegressionAndUnlabeled) {
  std::string path =
      write("d.jsonl",
            "{\"s1\": \"a\", \"s2\": \"b\", \"y\": 0.5}\n{\"s1\": \"c\", \"s2\": \"d\", "
            "\"y\": \"4\"}\n");
  CustomFileOptions reg;
  reg.label_kind = LabelKind::kNumber;
  LoadedExamples loaded = load_custom_file(path, {"s1", "s2", "y"}, reg);
  EXPECT_EQ(labels_of(loaded), (std::vector<float>{0.5f, 4.0f}));
  EXPECT_TRUE(loaded.label_names.empty());
  LoadedExamples unlabeled = load_custom_file(path, {"s1", std::nullopt, std::nullopt});
  ASSERT_EQ(unlabeled.examples.size(), 2u);
  EXPECT_FALSE(unlabeled.examples[1].has_label);
  EXPECT_EQ(unlabeled.examples[1].text_a, "c");
}

TEST_F(CustomFile, HeaderlessIndicesAndSkipCount) {
  std::string path = write("d.txt", "x\tfirst\t1\nbroken\ny\tsecond\t0\n");
  CustomFileOptions options;
  options.table.header = false;
  options.table.skip_malformed = true;
  LoadedExamples loaded = load_custom_file(path, {"1", std::nullopt, "2"}, options);
  ASSERT_EQ(loaded.examples.size(), 2u);
  EXPECT_EQ(loaded.skipped_rows, 1);
  EXPECT_EQ(loaded.examples[1].text_a, "second");
  EXPECT_EQ(loaded.examples[1].line, 3);
  EXPECT_EQ(loaded.label_names, (std::vector<std::string>{"0", "1"}));
}

TEST_F(CustomFile, Errors) {
  std::string one = write("one.tsv", "text\tlabel\na\tx\nb\tx\n");
  EXPECT_NE(error_of([&] {
              load_custom_file(one, {"text", std::nullopt, "label"});
            }).find("holds a single value 'x'"),
            std::string::npos);
  std::string empty = write("empty.csv", "");
  EXPECT_NE(error_of([&] {
              load_custom_file(empty, {"text", std::nullopt, "label"});
            }).find("empty.csv is empty"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              load_custom_file(one, {"sentence", std::nullopt, "label"});
            })
                .find("column 'sentence' not found in the header of " + one +
                      "; available columns: 'text', 'label'"),
            std::string::npos);
  CustomFileOptions reg;
  reg.label_kind = LabelKind::kNumber;
  EXPECT_NE(error_of([&] {
              load_custom_file(one, {"text", std::nullopt, "label"}, reg);
            }).find("one.tsv:2: regression label 'x'"),
            std::string::npos);
}

TEST_F(CustomFile, LabelKindsAreInferredAsRunGlueDoes) {
  // Integers: classes. A fraction anywhere: regression. JSON lists: multi-label.
  LoadedExamples ints = load_custom_file(write("i.tsv", "t\ty\na\t1\nb\t0\n"), {"t", {}, "y"});
  EXPECT_EQ(ints.label_kind, LabelKind::kClass);
  LoadedExamples floats = load_custom_file(write("f.tsv", "t\ty\na\t1\nb\t0.5\n"), {"t", {}, "y"});
  EXPECT_EQ(floats.label_kind, LabelKind::kNumber);
  EXPECT_EQ(labels_of(floats), (std::vector<float>{1.0f, 0.5f}));
  LoadedExamples lists = load_custom_file(
      write("l.jsonl", "{\"t\": \"a\", \"y\": [\"b\", \"a\"]}\n{\"t\": \"b\", \"y\": []}\n"),
      {"t", {}, "y"});
  EXPECT_EQ(lists.label_kind, LabelKind::kClassList);
  EXPECT_EQ(lists.label_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(lists.examples[0].label_ids, (std::vector<std::int32_t>{0, 1}));
  EXPECT_TRUE(lists.examples[1].label_ids.empty());
  // Comma cells when the caller says the column holds lists; unknown names fail with the line.
  CustomFileOptions multi;
  multi.label_kind = LabelKind::kClassList;
  multi.label_names = std::vector<std::string>{"x", "y"};
  LoadedExamples cells =
      load_custom_file(write("c.tsv", "t\ty\na\ty, x\nb\t\n"), {"t", {}, "y"}, multi);
  EXPECT_EQ(cells.examples[0].label_ids, (std::vector<std::int32_t>{0, 1}));
  std::string msg;
  try {
    load_custom_file(write("c2.tsv", "t\ty\na\tx,q\n"), {"t", {}, "y"}, multi);
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("c2.tsv:2: label 'q'"), std::string::npos) << msg;
}

}  // namespace
}  // namespace bertfit
