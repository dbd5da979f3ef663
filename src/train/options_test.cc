// The training flag table and what follows from it: every flag saved with the run (a choice
// flag as its word, as checkpoints have always had it), the resume check naming each changed
// trajectory option (and accepting the same --model folder spelled another way), --eval-every's
// words, and the validation of values a user can get wrong (non-finite numbers included).
#include "train/options.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace bertfit {
namespace {

TrainOptions valid() {
  TrainOptions o;
  o.model_dir = "m";
  o.output_dir = "out";
  o.data.task = "mrpc";
  o.data.data_dir = "glue/MRPC";
  return o;
}

std::string error_of(const TrainOptions& o) {
  try {
    validate_train_options(o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TrainOptions, EveryFlagIsSavedOnce) {
  TrainOptions o = valid();
  const nlohmann::json j = options_to_json(o);
  const FlagTable table = train_flags(o);
  EXPECT_EQ(j.size(), table.size());
  for (const Flag& f : table) {
    EXPECT_EQ(f.name.rfind("--", 0), 0u) << f.name;
    EXPECT_TRUE(j.contains(f.name.substr(2))) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
  }
}

// The words checkpoints hold: a resumed run compares against them.
TEST(TrainOptions, ChoiceFlagsAreSavedAsTheirWords) {
  TrainOptions o = valid();
  nlohmann::json j = options_to_json(o);
  EXPECT_EQ(j["precision"], "fp32");
  EXPECT_EQ(j["grad-comm-dtype"], "fp32");
  EXPECT_EQ(j["eval-every"], "epoch");
  o.compute.precision = Precision::kBF16;
  o.dist.grad_comm_dtype = WireDType::kBF16;
  o.eval_every = {EvalEvery::When::kSteps, 25};
  j = options_to_json(o);
  EXPECT_EQ(j["precision"], "bf16");
  EXPECT_EQ(j["grad-comm-dtype"], "bf16");
  EXPECT_EQ(j["eval-every"], "25");
  o.eval_every = {EvalEvery::When::kEnd};
  EXPECT_EQ(options_to_json(o)["eval-every"], "end");
  o.eval_every = {EvalEvery::When::kNever};
  EXPECT_EQ(options_to_json(o)["eval-every"], "never");
}

TEST(TrainOptions, EvalEveryWords) {
  using When = EvalEvery::When;
  EXPECT_EQ(parse_eval_every("epoch"), EvalEvery{When::kEpoch});
  EXPECT_EQ(parse_eval_every("end"), EvalEvery{When::kEnd});
  EXPECT_EQ(parse_eval_every("never"), EvalEvery{When::kNever});
  EXPECT_EQ(parse_eval_every("100"), (EvalEvery{When::kSteps, 100}));
  for (const char* bad :
       {"", "sometimes", "0", "-5", "+5", "1e3", "Epoch", "99999999999999999999"}) {
    EXPECT_EQ(parse_eval_every(bad), std::nullopt) << bad;
  }
  for (const char* word : {"epoch", "end", "never", "7"}) {
    EXPECT_EQ(eval_every_name(*parse_eval_every(word)), word);
  }
}

TEST(TrainOptions, ResumeCheckNamesEveryChangedOption) {
  TrainOptions o = valid();
  const nlohmann::json saved = options_to_json(o);
  EXPECT_NO_THROW(check_resume_compatible(o, saved));
  o.model_dir = "./m/";  // the same folder
  EXPECT_NO_THROW(check_resume_compatible(o, saved));
  o.model_dir = "other";
  o.lr = 1e-3;
  o.compute.threads = 7;  // does not change the trajectory
  o.dist.bucket_mb = 4;   // neither does this
  try {
    check_resume_compatible(o, saved);
    FAIL() << "a changed --lr and --model were accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--lr is 0.001"), std::string::npos) << m;
    EXPECT_NE(m.find("--model is \"other\""), std::string::npos) << m;
    EXPECT_EQ(m.find("--threads"), std::string::npos) << m;
    EXPECT_EQ(m.find("--bucket-mb"), std::string::npos) << m;
  }
  // A changed choice flag is named with its words.
  o = valid();
  o.compute.precision = Precision::kBF16;
  try {
    check_resume_compatible(o, saved);
    FAIL() << "a changed --precision was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--precision is \"bf16\" but the checkpoint has \"fp32\""), std::string::npos)
        << m;
  }
}

// The global batch and the run's length are the resume's to judge (run_setup.cc), not "options
// differ": another number of ranks takes another --batch-size, and a run may be extended.
TEST(TrainOptions, ResumeCheckLeavesBatchShapeAndLengthToTheResume) {
  TrainOptions o = valid();
  const nlohmann::json saved = options_to_json(o);
  o.compute.batch_size = 16;
  o.grad_accum = 2;
  o.max_steps = 900;
  o.epochs = 5;
  EXPECT_NO_THROW(check_resume_compatible(o, saved));
}

// A checkpoint written before a flag existed ran with its default (--revision: main).
TEST(TrainOptions, AFlagTheCheckpointPredatesCountsAsItsDefault) {
  TrainOptions o = valid();
  nlohmann::json saved = options_to_json(o);
  saved.erase("revision");
  EXPECT_NO_THROW(check_resume_compatible(o, saved));
  o.revision = "v1";
  try {
    check_resume_compatible(o, saved);
    FAIL() << "a changed --revision was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--revision is \"v1\" but the checkpoint has \"main\" "
                                         "(the default: it predates the flag)"),
              std::string::npos)
        << e.what();
  }
  // A Hub repository id is the same model when it is the same words.
  o = valid();
  o.model_dir = "org/name";
  saved = options_to_json(o);
  EXPECT_NO_THROW(check_resume_compatible(o, saved));
  o.resolved_model = "/cache/models--org--name/snapshots/0123";  // not saved, not compared
  EXPECT_NO_THROW(check_resume_compatible(o, saved));
  EXPECT_EQ(options_to_json(o).dump().find("snapshots"), std::string::npos);
}

TEST(TrainOptions, ValidationNamesTheFlag) {
  EXPECT_EQ(error_of(valid()), "");
  auto with = [](auto change) {
    TrainOptions o = valid();
    change(o);
    return error_of(o);
  };
  EXPECT_NE(with([](TrainOptions& o) { o.lr = std::nan(""); }).find("--lr must be a finite"),
            std::string::npos);
  EXPECT_NE(with([](TrainOptions& o) { o.epochs = INFINITY; }).find("--epochs"), std::string::npos);
  EXPECT_NE(with([](TrainOptions& o) { o.dist.bucket_mb = -INFINITY; }).find("--bucket-mb"),
            std::string::npos);
  EXPECT_NE(with([](TrainOptions& o) { o.compute.batch_size = 0; }).find("--batch-size"),
            std::string::npos);
  EXPECT_NE(with([](TrainOptions& o) { o.data.train_file = "x.tsv"; }).find("either --task"),
            std::string::npos);
}

}  // namespace
}  // namespace bertfit
