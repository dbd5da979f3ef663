// The learning-rate schedules (see schedule.h): transformers 4.28.1's lr_lambda functions of
// optimization.py, each multiplied by base_lr as LambdaLR does.
#include "train/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/check.h"

namespace bertfit {
namespace {

// The warmup every schedule but constant shares: s / max(1, warmup).
double warmup_factor(double s, std::int64_t warmup) {
  return s / static_cast<double>(std::max<std::int64_t>(1, warmup));
}

// Progress through the decay after the warmup, 0 at its start, 1 at the end of the run.
double decay_progress(double s, std::int64_t warmup, std::int64_t total) {
  return (s - static_cast<double>(warmup)) /
         static_cast<double>(std::max<std::int64_t>(1, total - warmup));
}

// The factor LambdaLR multiplies base_lr by at step s (s >= warmup for all but constant).
double decay_factor(LrSchedule schedule, double base_lr, double s, std::int64_t warmup,
                    std::int64_t total) {
  constexpr double kPi = std::numbers::pi;
  switch (schedule) {
    case LrSchedule::kLinear:
      break;  // linear_schedule_lr
    case LrSchedule::kCosine: {
      const double num_cycles = 0.5;
      const double progress = decay_progress(s, warmup, total);
      return std::max(0.0, 0.5 * (1.0 + std::cos(kPi * num_cycles * 2.0 * progress)));
    }
    case LrSchedule::kCosineWithRestarts: {
      const double num_cycles = 1.0;
      const double progress = decay_progress(s, warmup, total);
      if (progress >= 1.0) return 0.0;
      // Python's % of a non-negative float by 1.0 is fmod.
      return std::max(0.0, 0.5 * (1.0 + std::cos(kPi * std::fmod(num_cycles * progress, 1.0))));
    }
    case LrSchedule::kPolynomial: {
      const double lr_end = kPolynomialEndLr, power = 1.0, lr_init = base_lr;
      if (s > static_cast<double>(total)) return lr_end / lr_init;
      const double lr_range = lr_init - lr_end;
      // decay_steps is 0 only when warmup = total, and then no step s < total gets here.
      const double decay_steps = static_cast<double>(total - warmup);
      if (decay_steps <= 0) return lr_end / lr_init;
      const double pct_remaining = 1 - (s - static_cast<double>(warmup)) / decay_steps;
      const double decay = lr_range * std::pow(pct_remaining, power) + lr_end;
      return decay / lr_init;
    }
    case LrSchedule::kConstant:
    case LrSchedule::kConstantWithWarmup:
      return 1.0;
    case LrSchedule::kInverseSqrt: {
      const double timescale = warmup > 0 ? static_cast<double>(warmup) : 10000.0;
      const double shift = timescale - static_cast<double>(warmup);
      return 1.0 / std::sqrt((s + shift) / timescale);
    }
  }
  CHECK(false, "no decay factor for schedule ", static_cast<int>(schedule));
  return 0.0;
}

}  // namespace

const std::vector<Choice<LrSchedule>>& lr_schedule_choices() {
  static const std::vector<Choice<LrSchedule>> choices = {
      {"linear", LrSchedule::kLinear},
      {"cosine", LrSchedule::kCosine},
      {"cosine_with_restarts", LrSchedule::kCosineWithRestarts},
      {"polynomial", LrSchedule::kPolynomial},
      {"constant", LrSchedule::kConstant},
      {"constant_with_warmup", LrSchedule::kConstantWithWarmup},
      {"inverse_sqrt", LrSchedule::kInverseSqrt},
  };
  return choices;
}

double linear_schedule_lr(double base_lr, double s, std::int64_t warmup, std::int64_t total) {
  if (s < static_cast<double>(warmup)) {
    return base_lr * s / static_cast<double>(std::max<std::int64_t>(1, warmup));
  }
  double remaining = (static_cast<double>(total) - s) /
                     static_cast<double>(std::max<std::int64_t>(1, total - warmup));
  return base_lr * std::max(0.0, remaining);
}

double schedule_lr(LrSchedule schedule, double base_lr, double s, std::int64_t warmup,
                   std::int64_t total) {
  if (schedule == LrSchedule::kLinear) return linear_schedule_lr(base_lr, s, warmup, total);
  if (schedule == LrSchedule::kConstant) return base_lr * 1.0;
  if (s < static_cast<double>(warmup)) return base_lr * warmup_factor(s, warmup);
  return base_lr * decay_factor(schedule, base_lr, s, warmup, total);
}

}  // namespace bertfit
