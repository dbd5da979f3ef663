// optuna's TPE through its Python child (optuna_driver.h): the protocol, seeds, and the whole
// loop (tuner.h) on a synthetic landscape of 108 combinations with 3% noise, where 20 runs must
// find a setting within 5% of the true optimum for at least 4 of 5 seeds (the target
// for real measurements, here on a landscape whose optimum is known). Skips when
// /usr/bin/python3 has no optuna (scripts/setup.sh installs it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <random>

#include "base/error.h"
#include "tune/optimizer.h"
#include "tune/optuna_driver.h"
#include "tune/tuner.h"

namespace bertfit::tune {
namespace {

bool have_optuna() {
  static const bool ok =
      std::system("/usr/bin/python3 -c 'import optuna, sklearn' >/dev/null 2>&1") == 0;
  return ok;
}

// The serve space of bench/tune_vs_grid.sh: 2 x 3 x 2 x 3 x 3 = 108 combinations.
Space serve_space() {
  Machine m;
  m.cores = 2;
  m.int8 = m.bf16 = true;
  m.tcmalloc = "/lib/tc.so";
  m.jemalloc = "/lib/je.so";
  return build_space(TuneMode::kServe, m, {.max_tokens = 512},
                     {"workers=auto", "max_batch_tokens=1024", "max_batch_requests=0",
                      "wait=passive,default,active"});
}

// A latency: precision dominates, threads next, the rest a few percent, one interaction.
double true_latency(const Setting& s) {
  static const std::map<std::string, double> factor{
      {"precision=fp32", 3.0},     {"precision=bf16", 1.6},   {"precision=int8", 1.0},
      {"threads=1", 1.7},          {"threads=2", 1.0},        {"wait=passive", 1.08},
      {"wait=default", 1.0},       {"wait=active", 0.96},     {"bind=none", 1.0},
      {"bind=close", 0.98},        {"allocator=glibc", 1.03}, {"allocator=tcmalloc", 1.0},
      {"allocator=jemalloc", 1.01}};
  double v = 5.0;
  for (const auto& [k, value] : s) {
    const auto it = factor.find(k + "=" + value);
    if (it != factor.end()) v *= it->second;
  }
  if (s.at("threads") == "1" && s.at("wait") == "active") v *= 0.97;
  return v;
}

class NoisyRunner : public TrialRunner {
 public:
  explicit NoisyRunner(unsigned seed) : rng_(seed) {}
  TrialResult run(const Setting& s, const std::function<bool()>&) override {
    std::normal_distribution<double> noise(0, 0.03);
    TrialResult r;
    r.status = TrialResult::Status::kOk;
    r.value = true_latency(s) * (1 + noise(rng_));
    return r;
  }

 private:
  std::mt19937 rng_;
};

TEST(Optuna, TheSameSeedAsksTheSameAndEverySettingCanBeTold) {
  if (!have_optuna()) GTEST_SKIP() << optuna_missing_message();
  const Space space = serve_space();
  std::vector<Setting> first, second;
  for (std::vector<Setting>* out : {&first, &second}) {
    OptunaDriver d(space, true, 7, 3);
    const double v = 1.0;
    d.tell(space.searched_defaults, &v);  // not asked: enqueued first
    for (int i = 0; i < 5; ++i) {
      out->push_back(d.ask());
      const double value = true_latency(space.complete(out->back()));
      d.tell(out->back(), i == 2 ? nullptr : &value);  // one failure
    }
    const nlohmann::json imp = d.importance();
    EXPECT_EQ(imp.size(), space.dims.size());
  }
  EXPECT_EQ(first, second);
  for (const Setting& s : first) EXPECT_EQ(s.size(), space.dims.size());
}

TEST(Optuna, TwentyRunsFindASettingWithinFivePercentOfTheOptimumForFourSeedsOfFive) {
  if (!have_optuna()) GTEST_SKIP() << optuna_missing_message();
  const Space space = serve_space();
  ASSERT_EQ(space.combinations(), 108);
  double optimum = 1e30;
  auto grid = make_grid_optimizer(space);
  while (auto s = grid->ask()) optimum = std::min(optimum, true_latency(space.complete(*s)));
  int within = 0;
  std::string precision_first;
  for (unsigned seed = 1; seed <= 5; ++seed) {
    auto tpe = make_tpe_optimizer(space, true, seed, 6);
    NoisyRunner runner(100 + seed);
    Tuner tuner(space, {"latency-p50", "ms", true}, *tpe, runner,
                {.trials = 20, .budget_s = 0, .remeasure = true, .trials_path = ""}, nullptr);
    const Outcome o = tuner.run([] { return false; });
    ASSERT_TRUE(o.best.has_value());
    EXPECT_LE(o.runs.size(), 20u);
    const double found = true_latency(o.best->setting);
    if (found <= optimum * 1.05) ++within;
    const nlohmann::json imp = tpe->importance();
    std::string top;
    double top_share = -1;
    for (const auto& [k, v] : imp.items()) {
      if (v.get<double>() > top_share) top = k, top_share = v.get<double>();
    }
    if (seed == 1) precision_first = top;
  }
  EXPECT_GE(within, 4);
  EXPECT_EQ(precision_first, "precision");
}

}  // namespace
}  // namespace bertfit::tune
