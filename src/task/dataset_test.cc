// load_train_data's decisions on small files: the model's label names and ids are kept when the
// data's labels are among them, a label the model lacks is named, a base model's head is sized
// from the data, --num-labels K with class ids gives K generic classes, a trained head of
// another size is refused unless ignore_mismatched_sizes; GLUE examples follow the model's order.
#include "task/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "base/log.h"
#include "tests/util/errors.h"

namespace bertfit {
namespace {

namespace fs = std::filesystem;
using testing::error_of;

class LoadTrainData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           cat("bertfit_dataset_", ::getpid(), "_",
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    write("d.tsv", "text\tlabel\na\tneg\nb\tpos\nc\tneg\n");
    data_.train_file = (dir_ / "d.tsv").string();
    data_.text_a_column = "text";
    data_.label_column = "label";
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  static ModelConfig named(std::vector<std::string> names) {
    ModelConfig c;
    c.num_labels = static_cast<int>(names.size());
    c.id2label = std::move(names);
    return c;
  }
  fs::path dir_;
  DataOptions data_;
  HeadOptions head_;
};

TEST_F(LoadTrainData, ModelNamesAndIdsAreKept) {
  TrainData d = load_train_data(data_, head_, named({"pos", "neg"}), 2, "m");
  EXPECT_EQ(d.config.id2label, (std::vector<std::string>{"pos", "neg"}));
  EXPECT_EQ(d.loaded.examples[0].label, 1.0f);  // "neg" is the model's id 1
  EXPECT_EQ(d.loaded.examples[1].label, 0.0f);
  EXPECT_FALSE(d.new_head);
  // A subset of the model's labels keeps its ids too.
  d = load_train_data(data_, head_, named({"neu", "pos", "neg"}), 3, "m");
  EXPECT_EQ(d.config.num_labels, 3);
  EXPECT_EQ(d.loaded.examples[0].label, 2.0f);
}

TEST_F(LoadTrainData, ALabelTheModelLacksIsNamed) {
  const std::string msg = error_of([&] {
    load_train_data(data_, head_, named({"pos", "neu"}), 2, "m");
  });
  EXPECT_NE(msg.find("d.tsv:2: label 'neg' is not one of the labels of m"), std::string::npos)
      << msg;
}

TEST_F(LoadTrainData, BaseModelHeadIsSizedFromTheData) {
  write("d.tsv", "text\tlabel\na\tx\nb\ty\nc\tz\n");
  TrainData d = load_train_data(data_, head_, ModelConfig{}, std::nullopt, "m");
  EXPECT_EQ(d.config.num_labels, 3);
  EXPECT_EQ(d.config.id2label, (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(d.config.problem_type, "single_label_classification");
  // The same with a trained head of two outputs: refused, or a new head when asked.
  const std::string msg = error_of([&] { load_train_data(data_, head_, ModelConfig{}, 2, "m"); });
  EXPECT_NE(msg.find("--ignore-mismatched-sizes"), std::string::npos) << msg;
  head_.ignore_mismatched_sizes = true;
  EXPECT_TRUE(load_train_data(data_, head_, ModelConfig{}, 2, "m").new_head);
}

TEST_F(LoadTrainData, NumLabelsWithClassIdsGivesGenericClasses) {
  write("d.tsv", "text\tlabel\na\t0\nb\t2\n");
  head_.num_labels = 4;
  TrainData d = load_train_data(data_, head_, ModelConfig{}, std::nullopt, "m");
  EXPECT_EQ(d.config.id2label,
            (std::vector<std::string>{"LABEL_0", "LABEL_1", "LABEL_2", "LABEL_3"}));
  EXPECT_EQ(d.loaded.examples[1].label, 2.0f);
  EXPECT_TRUE(d.task.integer_ids);
}

TEST_F(LoadTrainData, GlueExamplesFollowTheModelsOrder) {
  DataOptions glue;
  glue.task = "sst2";
  glue.data_dir = std::string(BERTFIT_SHARED_DIR) + "/data/glue/SST-2";
  TrainData task_order = load_train_data(glue, head_, ModelConfig{}, 2, "m");
  TrainData model_order = load_train_data(glue, head_, named({"1", "0"}), 2, "m");
  EXPECT_EQ(model_order.config.id2label, (std::vector<std::string>{"1", "0"}));
  ASSERT_EQ(task_order.loaded.examples.size(), model_order.loaded.examples.size());
  for (std::size_t i = 0; i < 50; ++i) {
    EXPECT_EQ(model_order.loaded.examples[i].label, 1.0f - task_order.loaded.examples[i].label);
  }
}

}  // namespace
}  // namespace bertfit
