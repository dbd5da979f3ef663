// Every --lr-scheduler-type against transformers 4.28.1's get_scheduler, step by step
// (tests/fixtures/schedules.json, made by tests/fixtures/make_schedule_fixture.py), and the
// fractional steps of a resumed run with another rank count.
#include "train/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "base/file.h"

namespace bertfit {
namespace {

// Tolerance. Each schedule is base_lr times a factor in [0, 1] that both sides compute with the
// same double operations (LambdaLR multiplies Python floats) from the same integers: at most ~8
// roundings of operands of magnitude <= π, each <= 2^-53 relative, and cos / sqrt within an ulp
// in any libm. The factor's absolute error is therefore <= ~8·π·2^-53 < 32·2^-53, and the lr's
// <= 32·2^-53·base_lr (~3.6e-15 relative to the peak). A wrong formula, default (num_cycles,
// power, lr_end, timescale) or an off-by-one step errs by far more (>= 1e-4 relative here).
double tolerance(double base_lr) { return 32 * 0x1p-53 * base_lr; }

nlohmann::json fixture() {
  return nlohmann::json::parse(
      read_file(std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/schedules.json"));
}

TEST(Schedule, EveryTypeMatchesTransformersAtEveryStep) {
  const nlohmann::json f = fixture();
  ASSERT_EQ(f["transformers"], "4.28.1");
  int compared = 0;
  for (const nlohmann::json& c : f["cases"]) {
    const double base_lr = c["base_lr"].get<double>();
    const std::int64_t warmup = c["warmup"].get<std::int64_t>(), total = c["total"];
    for (const Choice<LrSchedule>& choice : lr_schedule_choices()) {
      SCOPED_TRACE(::testing::Message() << choice.word << " lr " << base_lr << " warmup " << warmup
                                        << " total " << total);
      const nlohmann::json& lrs = c["lr"].at(choice.word);
      ASSERT_EQ(lrs.size(), static_cast<std::size_t>(total));
      for (std::int64_t s = 0; s < total; ++s) {
        const double want = lrs[s].get<double>();
        const double got =
            schedule_lr(choice.value, base_lr, static_cast<double>(s), warmup, total);
        ASSERT_NEAR(got, want, tolerance(base_lr)) << "step " << s;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 7 * (37 + 17 + 23 + 4 + 2));
}

// A resumed run with another rank count evaluates the schedule between whole steps: within each
// piece every schedule is monotone and continuous (also across the end of the warmup, where all
// reach base_lr), so the value at k + 1/2 lies between those at k and k + 1.
TEST(Schedule, FractionalStepsLieBetweenTheirNeighbours) {
  const nlohmann::json f = fixture();
  for (const nlohmann::json& c : f["cases"]) {
    const double base_lr = c["base_lr"].get<double>();
    const std::int64_t warmup = c["warmup"].get<std::int64_t>(), total = c["total"];
    for (const Choice<LrSchedule>& choice : lr_schedule_choices()) {
      SCOPED_TRACE(choice.word);
      for (std::int64_t k = 0; k + 1 < total; ++k) {
        auto lr = [&](double s) { return schedule_lr(choice.value, base_lr, s, warmup, total); };
        const double lo = std::min(lr(k), lr(k + 1)), hi = std::max(lr(k), lr(k + 1));
        const double mid = lr(static_cast<double>(k) + 0.5);
        EXPECT_GE(mid, lo - tolerance(base_lr)) << "k " << k;
        EXPECT_LE(mid, hi + tolerance(base_lr)) << "k " << k;
        if (choice.value != LrSchedule::kConstant && lo != hi) {
          EXPECT_TRUE(mid != lo && mid != hi) << "k " << k << ": not interpolated";
        }
      }
    }
  }
}

TEST(Schedule, KnownValues) {
  // Half way through the decay: cosine at half its peak, linear and polynomial (power 1) about
  // there too (polynomial ends at 1e-7, not 0), inverse_sqrt at 1/√(s / warmup).
  const double lr = 1e-3;
  const double tol = tolerance(lr);
  EXPECT_NEAR(schedule_lr(LrSchedule::kCosine, lr, 60.0, 20, 100), 0.5e-3, tol);
  EXPECT_NEAR(schedule_lr(LrSchedule::kCosineWithRestarts, lr, 60.0, 20, 100), 0.5e-3, tol);
  EXPECT_NEAR(schedule_lr(LrSchedule::kLinear, lr, 60.0, 20, 100), 0.5e-3, tol);
  EXPECT_NEAR(schedule_lr(LrSchedule::kPolynomial, lr, 60.0, 20, 100), 0.5e-3 + 0.5e-7, tol);
  EXPECT_NEAR(schedule_lr(LrSchedule::kInverseSqrt, lr, 80.0, 20, 100), 0.5e-3, tol);
  // Warmup: linear from 0 for every type but constant, which ignores it.
  for (const Choice<LrSchedule>& c : lr_schedule_choices()) {
    const double want = c.value == LrSchedule::kConstant ? lr : 0.25 * lr;
    EXPECT_NEAR(schedule_lr(c.value, lr, 5.0, 20, 100), want, tol) << c.word;
  }
  // inverse_sqrt without warmup: timescale 10000 (4.28.1 divides by zero there).
  EXPECT_NEAR(schedule_lr(LrSchedule::kInverseSqrt, lr, 30000.0, 0, 50000), 0.5e-3, tol);
}

}  // namespace
}  // namespace bertfit
