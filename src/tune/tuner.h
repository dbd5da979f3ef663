// The search loop of `bertfit tune` and its answer to noise. Trial 0 measures the defaults. Then
// the optimiser proposes settings; a setting whose one run beats the incumbent's mean is run
// again at once, and only a setting measured at least twice can be the incumbent. The last three
// runs confirm: the two best settings (by mean) and the defaults once more, alternated so that
// drift of a shared machine hits them alike. The answer is the best *mean* over at least two runs,
// never the luckiest single run. Every run counts toward --trials, and each is appended to
// trials.jsonl as it ends, so an interrupted tune keeps them.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tune/optimizer.h"
#include "tune/space.h"

namespace bertfit::tune {

struct Objective {
  std::string name;  // "latency-p50"
  std::string unit;  // "ms"
  bool minimize = true;
};

struct TrialResult {
  enum class Status { kOk, kFailed, kTimeout, kInterrupted };
  Status status = Status::kFailed;
  double value = 0;                                   // the objective, when kOk
  nlohmann::json metrics = nlohmann::json::object();  // the other figures of the run
  std::string note;                                   // why it failed
};
const char* status_name(TrialResult::Status s);

// Measures one complete setting (every knob of the mode); a failed run is a result, not an
// exception. `stop` turns true on Ctrl-C: the run ends at once as kInterrupted.
class TrialRunner {
 public:
  virtual ~TrialRunner() = default;
  virtual TrialResult run(const Setting& s, const std::function<bool()>& stop) = 0;
};

struct TuneOptions {
  int trials = 20;
  double budget_s = 0;      // wall-clock limit of the search; 0: none
  bool remeasure = true;    // re-measure new bests and confirm at the end (off for the grid)
  std::string trials_path;  // trials.jsonl, appended per run ("": none)
};

struct TrialRun {
  int index = 0;
  Setting setting;  // complete
  std::string key;  // describe(setting)
  TrialResult result;
  double wall_s = 0;
  std::string role;  // "defaults", "search", "re-measure", "confirm"
};

struct Summary {
  std::string key;
  Setting setting;
  std::vector<double> values;  // the ok runs' values
  double mean() const;
  double spread() const;  // (max - min) / mean
};

struct Outcome {
  std::vector<TrialRun> runs;
  std::optional<Summary> best;      // the answer
  std::optional<Summary> defaults;  // the defaults' runs
  bool interrupted = false, budget_hit = false, exhausted = false;
};

class Tuner {
 public:
  using OnRun = std::function<void(const TrialRun& run, const std::string& remark)>;
  Tuner(const Space& space, const Objective& objective, Optimizer& optimizer, TrialRunner& runner,
        const TuneOptions& options, OnRun on_run);
  Outcome run(const std::function<bool()>& stop);

  // The summaries of the settings measured so far, best first by mean (settings with fewer
  // than `min_runs` ok runs left out).
  std::vector<Summary> ranking(int min_runs) const;

 private:
  bool better(double a, double b) const { return objective_.minimize ? a < b : a > b; }
  const TrialRun& measure(const Setting& searched, const std::string& role,
                          const std::function<bool()>& stop);
  std::optional<Summary> answer(bool cut_short) const;
  bool measured(const Setting& searched) const;

  Space space_;
  Objective objective_;
  Optimizer& optimizer_;
  TrialRunner& runner_;
  TuneOptions options_;
  OnRun on_run_;
  std::vector<TrialRun> runs_;
};

}  // namespace bertfit::tune
