// Checkpoints: what save_checkpoint writes, load_checkpoint_state reads back exactly (Adam's
// moments, the step, the trainer state); find_checkpoint accepts the run folder, the checkpoint
// folder itself and a checkpoint.old left by an interrupted swap; a damaged optimizer file is an
// error naming it; a save leaves no temporary folder behind. A resumed run keeps the
// checkpoint's global batch on any number of ranks (resume_step_shape).
#include "train/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/family.h"
#include "model/init.h"
#include "model/test_config.h"

namespace bertfit {
namespace {

namespace fs = std::filesystem;

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            std::string("bertfit-ckpt-").append(std::to_string(::getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    vocab_ = dir_ + "/vocab.txt";
    std::string v = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (int i = 5; i < 200; ++i) v.append("w").append(std::to_string(i)).append("\n");
    std::FILE* f = std::fopen(vocab_.c_str(), "w");
    std::fputs(v.c_str(), f);
    std::fclose(f);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_, vocab_;
};

TEST_F(Checkpoint, RoundTripsAndIsFoundWhereverItIs) {
  ModelState state(small_test_config(model_family("distilbert"), 2));
  init_params(state.layout, state.config, 3, state.params.data());
  AdamW saved(state.layout, {});
  for (std::size_t i = 0; i < saved.m().size(); ++i) {
    saved.m()[i] = 0.5f * static_cast<float>(i % 7);
    saved.v()[i] = 0.25f * static_cast<float>(i % 5);
  }
  const nlohmann::json trainer{{"step", 12}, {"samples_seen", 384}, {"options", {{"lr", 2e-5}}}};
  save_checkpoint(dir_, state, vocab_, saved, trainer);
  save_checkpoint(dir_, state, vocab_, saved, trainer);  // a second save swaps cleanly
  EXPECT_FALSE(fs::exists(dir_ + "/checkpoint.tmp"));
  EXPECT_FALSE(fs::exists(dir_ + "/checkpoint.old"));

  const std::string found = find_checkpoint(dir_);
  EXPECT_EQ(found, dir_ + "/checkpoint");
  EXPECT_EQ(find_checkpoint(found), found);
  AdamW loaded(state.layout, {});
  const nlohmann::json back = load_checkpoint_state(found, loaded);
  EXPECT_EQ(back, trainer);
  EXPECT_EQ(loaded.steps_taken(), 12);
  for (std::size_t i = 0; i < saved.m().size(); ++i) {
    ASSERT_EQ(loaded.m()[i], saved.m()[i]) << i;
    ASSERT_EQ(loaded.v()[i], saved.v()[i]) << i;
  }
  // An interrupted swap leaves only checkpoint.old: still found.
  fs::rename(dir_ + "/checkpoint", dir_ + "/checkpoint.old");
  EXPECT_EQ(find_checkpoint(dir_), dir_ + "/checkpoint.old");
  fs::rename(dir_ + "/checkpoint.old", dir_ + "/checkpoint");

  // A truncated optimizer file: an error naming it.
  fs::resize_file(found + "/optimizer.safetensors", 64);
  try {
    load_checkpoint_state(found, loaded);
    FAIL() << "a truncated optimizer.safetensors loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.safetensors"), std::string::npos) << e.what();
  }
  // No checkpoint at all: the message says where it looked.
  try {
    find_checkpoint(dir_ + "/nowhere");
    FAIL() << "found a checkpoint in an empty place";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("trainer_state.json"), std::string::npos) << e.what();
  }
}

// --save-total-limit: the newest stays checkpoint/, the older ones become checkpoint-STEP and
// the oldest go beyond the limit; 1 keeps none of them, 0 keeps them all.
TEST_F(Checkpoint, KeepsAsManyAsTheLimitSays) {
  ModelState state(small_test_config(model_family("distilbert"), 2));
  init_params(state.layout, state.config, 3, state.params.data());
  AdamW opt(state.layout, {});
  auto steps_kept = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("checkpoint", 0) == 0) names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
  };
  for (int step : {10, 20, 30, 40}) save_checkpoint(dir_, state, vocab_, opt, {{"step", step}}, 3);
  EXPECT_EQ(steps_kept(),
            (std::vector<std::string>{"checkpoint", "checkpoint-20", "checkpoint-30"}));
  AdamW back(state.layout, {});
  EXPECT_EQ(load_checkpoint_state(dir_ + "/checkpoint", back)["step"], 40);
  EXPECT_EQ(load_checkpoint_state(dir_ + "/checkpoint-20", back)["step"], 20);
  save_checkpoint(dir_, state, vocab_, opt, {{"step", 50}}, 1);
  EXPECT_EQ(steps_kept(),
            (std::vector<std::string>{"checkpoint", "checkpoint-20", "checkpoint-30"}))
      << "a limit of 1 drops the previous checkpoint and leaves older ones it did not make";
  for (int step : {60, 70}) save_checkpoint(dir_, state, vocab_, opt, {{"step", step}}, 0);
  EXPECT_EQ(steps_kept(), (std::vector<std::string>{"checkpoint", "checkpoint-20", "checkpoint-30",
                                                    "checkpoint-50", "checkpoint-60"}));
}

// OUTPUT/best holds the best step's weights; reading it back for another step is an error.
TEST_F(Checkpoint, BestModelRoundTripsAndNamesItsStep) {
  ModelState state(small_test_config(model_family("distilbert"), 2));
  init_params(state.layout, state.config, 3, state.params.data());
  save_best_model(dir_, state, vocab_, 7);
  ModelState other(small_test_config(model_family("distilbert"), 2));
  init_params(other.layout, other.config, 4, other.params.data());
  save_best_model(dir_, other, vocab_, 9);
  EXPECT_FALSE(fs::exists(dir_ + "/best.tmp"));
  EXPECT_FALSE(fs::exists(dir_ + "/best.old"));
  ModelState into(small_test_config(model_family("distilbert"), 2));
  load_best_params(dir_, 9, into);
  for (std::int64_t i = 0; i < into.layout.total(); ++i) {
    ASSERT_EQ(into.params[i], other.params[i]) << i;
  }
  try {
    load_best_params(dir_, 7, into);
    FAIL() << "the best model of step 9 was taken for step 7";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step 7"), std::string::npos) << e.what();
  }
}

// The error a resume_step_shape call throws ("" if none).
std::string shape_error(std::int64_t global, StepShape saved, int saved_world, StepShape given,
                        int world) {
  std::string note;
  try {
    resume_step_shape(global, saved, saved_world, given, world, &note);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ResumeStepShape, KeepsTheGlobalBatchOnAnotherNumberOfRanks) {
  std::string note;
  // The same flags on the same ranks: nothing to say.
  EXPECT_EQ(resume_step_shape(32, {32, 1}, 1, {32, 1}, 1, &note), (StepShape{32, 1}));
  EXPECT_EQ(note, "");
  // 1 rank × 32 on 2 ranks: the accumulation cannot halve, the batch does.
  EXPECT_EQ(resume_step_shape(32, {32, 1}, 1, {32, 1}, 2, &note), (StepShape{16, 1}));
  EXPECT_NE(note.find("--batch-size 16 --grad-accum 1"), std::string::npos) << note;
  // 1 rank × 8 × 4 on 2 ranks: the per-rank batch stays, the accumulation halves.
  note.clear();
  EXPECT_EQ(resume_step_shape(32, {8, 4}, 1, {8, 4}, 2, &note), (StepShape{8, 2}));
  EXPECT_NE(note.find("--grad-accum 2"), std::string::npos) << note;
  // 2 ranks × 8 on 1 rank: the batch stays (memory), the accumulation doubles.
  EXPECT_EQ(resume_step_shape(16, {8, 1}, 2, {8, 1}, 1, &note), (StepShape{8, 2}));
  // 1 rank × 4 × 9 on 6 ranks: neither 4 nor 9 divides 6; the largest batch below 4 that does.
  EXPECT_EQ(resume_step_shape(36, {4, 9}, 1, {4, 9}, 6, &note), (StepShape{3, 2}));
  // An explicit shape that keeps the global batch is taken as it is.
  EXPECT_EQ(resume_step_shape(32, {32, 1}, 1, {16, 1}, 2, &note), (StepShape{16, 1}));
  EXPECT_EQ(resume_step_shape(32, {32, 1}, 1, {4, 4}, 2, &note), (StepShape{4, 4}));
}

TEST(ResumeStepShape, RefusesAnotherGlobalBatchNamingWhatWouldKeepIt) {
  const std::string other = shape_error(32, {32, 1}, 1, {5, 1}, 2);
  EXPECT_NE(other.find("take 10 samples per optimizer step"), std::string::npos) << other;
  EXPECT_NE(other.find("32 samples per optimizer step (1 rank × 32 × 1 accumulation)"),
            std::string::npos)
      << other;
  EXPECT_NE(other.find("--batch-size 16 --grad-accum 1, --batch-size 8 --grad-accum 2, "
                       "--batch-size 4 --grad-accum 4 or --batch-size 2 --grad-accum 8"),
            std::string::npos)
      << other;
  // A checkpoint of a run that adapted its flags (typed 32 × 1, ran 16 × 1 on 2 ranks): its
  // typed shape is not what it ran, so only the global batch is named.
  const std::string adapted = shape_error(32, {32, 1}, 2, {5, 1}, 2);
  EXPECT_NE(adapted.find("the checkpoint's run takes 32 samples per optimizer step; to keep"),
            std::string::npos)
      << adapted;
  // 5 samples per step cannot be split across 2 ranks, whatever the flags.
  const std::string odd = shape_error(5, {5, 1}, 1, {5, 1}, 2);
  EXPECT_NE(odd.find("2 ranks cannot share evenly; resume it on 1 or 5 ranks"), std::string::npos)
      << odd;
}

}  // namespace
}  // namespace bertfit
