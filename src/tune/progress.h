// What `bertfit tune` shows while it runs (stderr): a header naming the objective, the space
// and what dropped out; one row per run as it ends (each knob's value, the objective, the
// run's other figures, a remark); and at the end the answer, its gain over the defaults and
// the knobs' importance.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tune/space.h"
#include "tune/tuner.h"

namespace bertfit::tune {

class Progress {
 public:
  Progress(const Space& space, const Objective& objective);
  std::string header(int trials, const std::string& sampler) const;
  std::string row(const TrialRun& run, const std::string& remark) const;

 private:
  std::string value_cell(const TrialRun& run) const;
  const Space& space_;
  Objective objective_;
  std::vector<std::size_t> widths_;
};

// "+23.4%" (or "-3.0%"): how much better the best is than the defaults, in the objective's
// direction (a latency's fall, a rate's rise); the ratio is defaults/best or best/defaults.
double speedup(const Objective& objective, double best, double defaults);

// "precision 0.71, threads 0.18, ..." (largest first).
std::string importance_line(const nlohmann::json& importance);

}  // namespace bertfit::tune
