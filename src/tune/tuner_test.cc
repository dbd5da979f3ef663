// The search loop (tuner.h) over scripted measurements: the defaults first, a new best measured
// again before it leads, the answer the best mean and not the luckiest run, failures recorded
// and told, Ctrl-C and the budget ending the search with what was measured.
#include "tune/tuner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "base/file.h"

namespace bertfit::tune {
namespace {

// wait in {passive, default, active}; bind held at none.
Space wait_space() {
  Space s;
  s.mode = TuneMode::kInfer;
  s.dims.push_back({find_knob("wait"), {"passive", "default", "active"}});
  s.fixed["bind"] = "none";
  s.searched_defaults["wait"] = "default";
  return s;
}

// Each setting's values in the order it is run (the last repeats).
class ScriptedRunner : public TrialRunner {
 public:
  explicit ScriptedRunner(std::map<std::string, std::vector<double>> script)
      : script_(std::move(script)) {}
  TrialResult run(const Setting& s, const std::function<bool()>&) override {
    const std::vector<double>& v = script_.at(s.at("wait"));
    const std::size_t n = seen_[s.at("wait")]++;
    TrialResult r;
    if (v.empty()) {
      r.note = "bertfit: error: scripted failure";
      return r;
    }
    r.status = TrialResult::Status::kOk;
    r.value = v[std::min(n, v.size() - 1)];
    return r;
  }

 private:
  std::map<std::string, std::vector<double>> script_;
  std::map<std::string, std::size_t> seen_;
};

// The grid's proposals, and a record of what it was told.
class RecordingOptimizer : public Optimizer {
 public:
  explicit RecordingOptimizer(const Space& s) : grid_(make_grid_optimizer(s)) {}
  const char* name() const override { return "recording"; }
  std::optional<Setting> ask() override { return grid_->ask(); }
  void tell(const Setting& s, std::optional<double> v) override {
    told.emplace_back(s.at("wait"), v);
  }
  std::vector<std::pair<std::string, std::optional<double>>> told;

 private:
  std::unique_ptr<Optimizer> grid_;
};

std::vector<std::string> roles(const Outcome& o) {
  std::vector<std::string> v;
  for (const TrialRun& r : o.runs) v.push_back(r.setting.at("wait") + ":" + r.role);
  return v;
}

TEST(Tuner, TheAnswerIsTheBestMeanNotTheLuckiestRun) {
  // passive has the luckiest single run (8) but a mean of 10.5; active's runs are all 9.
  const Space space = wait_space();
  ScriptedRunner runner({{"default", {10}}, {"passive", {8, 12, 11.5}}, {"active", {9}}});
  RecordingOptimizer opt(space);
  const std::string path = ::testing::TempDir() + "tuner_trials_" + std::to_string(getpid());
  std::vector<std::string> remarks;
  Tuner tuner(space, {"latency-p50", "ms", true}, opt, runner,
              {.trials = 9, .budget_s = 0, .remeasure = true, .trials_path = path},
              [&](const TrialRun&, const std::string& remark) { remarks.push_back(remark); });
  const Outcome o = tuner.run([] { return false; });
  EXPECT_EQ(roles(o),
            (std::vector<std::string>{"default:defaults", "passive:search", "passive:re-measure",
                                      "default:search", "active:search", "active:re-measure",
                                      "active:confirm", "default:confirm", "passive:confirm"}));
  ASSERT_TRUE(o.best.has_value());
  EXPECT_EQ(o.best->setting.at("wait"), "active");
  EXPECT_DOUBLE_EQ(o.best->mean(), 9);
  EXPECT_EQ(o.best->values.size(), 3u);
  ASSERT_TRUE(o.defaults.has_value());
  EXPECT_EQ(o.defaults->values, (std::vector<double>{10, 10, 10}));
  EXPECT_EQ(remarks[1], "new best?");
  EXPECT_EQ(opt.told.size(), 9u);  // every run, the defaults and re-measurements too
  // One line per run in trials.jsonl, as it ended.
  const std::string text = read_file(path);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 9);
  EXPECT_NE(text.find("\"role\":\"re-measure\""), std::string::npos);
  std::remove(path.c_str());
}

TEST(Tuner, FailuresAreRecordedAndToldAndAllFailingGivesNoAnswer) {
  const Space space = wait_space();
  ScriptedRunner runner({{"default", {}}, {"passive", {}}, {"active", {}}});
  RecordingOptimizer opt(space);
  Tuner tuner(space, {"throughput", "samples/s", false}, opt, runner,
              {.trials = 6, .budget_s = 0, .remeasure = true, .trials_path = ""}, nullptr);
  const Outcome o = tuner.run([] { return false; });
  EXPECT_FALSE(o.best.has_value());
  ASSERT_GE(o.runs.size(), 3u);
  for (const TrialRun& r : o.runs) {
    EXPECT_EQ(r.result.status, TrialResult::Status::kFailed);
    EXPECT_EQ(r.result.note, "bertfit: error: scripted failure");
  }
  for (const auto& [wait, value] : opt.told) EXPECT_FALSE(value.has_value()) << wait;
}

TEST(Tuner, ASettingWorseThanTheDefaultsIsNoAnswerHoweverOftenMeasured) {
  // Three runs: the defaults once (100), then active twice (a 90 and a 70): the defaults stay.
  const Space space = wait_space();
  ScriptedRunner runner({{"default", {100}}, {"passive", {90, 70}}, {"active", {90, 70}}});
  RecordingOptimizer opt(space);
  Tuner tuner(space, {"throughput", "samples/s", false}, opt, runner,
              {.trials = 3, .budget_s = 0, .remeasure = true, .trials_path = ""}, nullptr);
  const Outcome o = tuner.run([] { return false; });
  ASSERT_EQ(o.runs.size(), 3u);
  EXPECT_EQ(o.runs[2].role, "confirm");
  EXPECT_EQ(o.best->key, o.defaults->key);
}

TEST(Tuner, MaximisingPicksTheHighestMean) {
  const Space space = wait_space();
  ScriptedRunner runner({{"default", {100}}, {"passive", {90}}, {"active", {120, 118}}});
  RecordingOptimizer opt(space);
  Tuner tuner(space, {"throughput", "samples/s", false}, opt, runner,
              {.trials = 20, .budget_s = 0, .remeasure = true, .trials_path = ""}, nullptr);
  const Outcome o = tuner.run([] { return false; });
  ASSERT_TRUE(o.best.has_value());
  EXPECT_EQ(o.best->setting.at("wait"), "active");
  EXPECT_GE(o.best->values.size(), 2u);
}

TEST(Tuner, AStopRequestKeepsWhatWasMeasuredAndSkipsTheConfirmation) {
  const Space space = wait_space();
  ScriptedRunner runner({{"default", {10}}, {"passive", {8}}, {"active", {9}}});
  RecordingOptimizer opt(space);
  int runs = 0;
  Tuner tuner(space, {"latency-p50", "ms", true}, opt, runner,
              {.trials = 20, .budget_s = 0, .remeasure = true, .trials_path = ""},
              [&](const TrialRun&, const std::string&) { ++runs; });
  const Outcome o = tuner.run([&] { return runs >= 2; });
  EXPECT_TRUE(o.interrupted);
  EXPECT_EQ(o.runs.size(), 2u);
  ASSERT_TRUE(o.best.has_value());  // the best single run, since nothing was re-measured
  EXPECT_EQ(o.best->setting.at("wait"), "passive");
}

TEST(Tuner, TheGridRunsEveryCombinationOnceWithoutReMeasuring) {
  const Space space = wait_space();
  ScriptedRunner runner({{"default", {10}}, {"passive", {8}}, {"active", {9}}});
  RecordingOptimizer opt(space);
  Tuner tuner(space, {"latency-p50", "ms", true}, opt, runner,
              {.trials = 4, .budget_s = 0, .remeasure = false, .trials_path = ""}, nullptr);
  const Outcome o = tuner.run([] { return false; });
  EXPECT_EQ(roles(o),
            (std::vector<std::string>{"default:defaults", "passive:search", "active:search"}));
  EXPECT_TRUE(o.exhausted);
  EXPECT_EQ(o.best->setting.at("wait"), "passive");
}

}  // namespace
}  // namespace bertfit::tune
