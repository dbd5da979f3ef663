// The training option table and what follows from it: every flag saved with the run, the
// resume check naming each changed trajectory option (and accepting the same --model folder
// spelled another way), and the validation of values a user can get wrong (non-finite numbers
// included).
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
  const auto table = train_option_table(o);
  EXPECT_EQ(j.size(), table.size());
  for (const OptionSpec& s : table) {
    EXPECT_EQ(s.flag.rfind("--", 0), 0u) << s.flag;
    EXPECT_TRUE(j.contains(s.flag.substr(2))) << s.flag;
    EXPECT_FALSE(s.help.empty()) << s.flag;
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
  o.threads = 7;  // does not change the trajectory
  try {
    check_resume_compatible(o, saved);
    FAIL() << "a changed --lr and --model were accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--lr is 0.001"), std::string::npos) << m;
    EXPECT_NE(m.find("--model is \"other\""), std::string::npos) << m;
    EXPECT_EQ(m.find("--threads"), std::string::npos) << m;
  }
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
  EXPECT_NE(with([](TrainOptions& o) { o.bucket_mb = -INFINITY; }).find("--bucket-mb"),
            std::string::npos);
  EXPECT_NE(with([](TrainOptions& o) { o.batch_size = 0; }).find("--batch-size"),
            std::string::npos);
  EXPECT_NE(with([](TrainOptions& o) { o.data.train_file = "x.tsv"; }).find("either --task"),
            std::string::npos);
  EXPECT_NE(with([](TrainOptions& o) { o.eval_every = "sometimes"; }).find("--eval-every"),
            std::string::npos);
}

}  // namespace
}  // namespace bertfit
