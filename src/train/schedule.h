// The learning-rate schedules of `bertfit train --lr-scheduler-type`, as transformers 4.28.1's
// get_scheduler builds them (optimization.py), with its defaults: cosine's half cycle,
// cosine_with_restarts' one cycle, polynomial's end rate 1e-7 and power 1, inverse_sqrt's
// timescale equal to the warmup. Each gives the learning rate of optimizer step s (0-based) of
// a run of `total` steps with `warmup` warmup steps, as torch's LambdaLR does: base_lr times
// the schedule's factor, in double as Python's floats.
//
// s may be fractional: a run resumed with a different number of ranks advances the schedule
// by samples seen / the original step size (train/run_setup.h). Every formula is continuous in
// s within each of its pieces, so it is evaluated at the fractional step as written.
#pragma once

#include <cstdint>
#include <vector>

#include "flags/flag.h"

namespace bertfit {

enum class LrSchedule {
  kLinear,
  kCosine,
  kCosineWithRestarts,
  kPolynomial,
  kConstant,
  kConstantWithWarmup,
  kInverseSqrt,
};

// The words of --lr-scheduler-type, transformers' SchedulerType values, with their schedules.
const std::vector<Choice<LrSchedule>>& lr_schedule_choices();

// get_polynomial_decay_schedule_with_warmup's lr_end: polynomial needs base_lr above it.
inline constexpr double kPolynomialEndLr = 1e-7;

// The learning rate of step s under `schedule`. constant ignores the warmup (as get_scheduler,
// which passes it none). inverse_sqrt with warmup 0 divides by zero in 4.28.1; here its
// timescale is then 10000, as in the transformers versions that fixed it.
double schedule_lr(LrSchedule schedule, double base_lr, double s, std::int64_t warmup,
                   std::int64_t total);

// get_linear_schedule_with_warmup (the default). Kept in its own rounding order (base_lr · s /
// warmup, not base_lr · (s / warmup)): the golden trajectories were recorded with it; the two
// differ by at most an ulp.
double linear_schedule_lr(double base_lr, double s, std::int64_t warmup, std::int64_t total);

}  // namespace bertfit
