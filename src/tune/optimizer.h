// Who proposes the next setting to measure: the exhaustive grid, uniform random draws, or
// optuna's tree-structured Parzen estimator (TPE, expected improvement under its model) in a
// Python child (optuna_optimizer.cc). An optimiser sees the searched knobs only (Space::dims);
// the tuner tells it every measurement, including the ones it did not ask for (the defaults,
// re-measurements), so its model holds every value.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "tune/space.h"

namespace bertfit::tune {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual const char* name() const = 0;
  // The next setting (searched knobs only); nullopt when the optimiser has nothing left.
  virtual std::optional<Setting> ask() = 0;
  // A measurement of `s` (asked or not): its objective value, nullopt when the run failed.
  virtual void tell(const Setting& s, std::optional<double> value) = 0;
  // Each searched knob's share of the objective's variance (fANOVA), when the optimiser can
  // say; an empty object otherwise.
  virtual nlohmann::json importance() { return nlohmann::json::object(); }
};

// Every combination once, in order (the first knob slowest).
std::unique_ptr<Optimizer> make_grid_optimizer(const Space& space);
// Uniform draws, each combination at most once until all were drawn.
std::unique_ptr<Optimizer> make_random_optimizer(const Space& space, unsigned seed);

// optuna's TPE (optuna_driver.h): `startup` random draws, then expected improvement under the
// Parzen estimators of the good and the other settings. Throws Error when optuna is missing.
std::unique_ptr<Optimizer> make_tpe_optimizer(const Space& space, bool minimize, unsigned seed,
                                              int startup);

// The importance of a finished search's measurements by optuna's fANOVA evaluator (grid and
// random runs), or an empty object with `why` set when Python's optuna is not there.
nlohmann::json fanova_importance(const Space& space,
                                 const std::vector<std::pair<Setting, double>>& measured,
                                 bool minimize, unsigned seed, std::string& why);

}  // namespace bertfit::tune
