// The search loop (tuner.h).
#include "tune/tuner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>

#include "base/error.h"
#include "base/timer.h"

namespace bertfit::tune {

const char* status_name(TrialResult::Status s) {
  switch (s) {
    case TrialResult::Status::kOk:
      return "ok";
    case TrialResult::Status::kFailed:
      return "failed";
    case TrialResult::Status::kTimeout:
      return "timeout";
    case TrialResult::Status::kInterrupted:
      return "interrupted";
  }
  return "?";
}

double Summary::mean() const {
  return values.empty() ? 0 : std::accumulate(values.begin(), values.end(), 0.0) / values.size();
}

double Summary::spread() const {
  if (values.size() < 2) return 0;
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return (*hi - *lo) / std::max(1e-12, std::abs(mean()));
}

Tuner::Tuner(const Space& space, const Objective& objective, Optimizer& optimizer,
             TrialRunner& runner, const TuneOptions& options, OnRun on_run)
    : space_(space),
      objective_(objective),
      optimizer_(optimizer),
      runner_(runner),
      options_(options),
      on_run_(std::move(on_run)) {}

std::vector<Summary> Tuner::ranking(int min_runs) const {
  std::map<std::string, Summary> by_key;
  std::vector<std::string> order;
  for (const TrialRun& r : runs_) {
    Summary& s = by_key[r.key];
    if (s.key.empty()) {
      s.key = r.key;
      s.setting = r.setting;
      order.push_back(r.key);
    }
    if (r.result.status == TrialResult::Status::kOk) s.values.push_back(r.result.value);
  }
  std::vector<Summary> out;
  for (const std::string& k : order) {
    if (static_cast<int>(by_key[k].values.size()) >= min_runs) out.push_back(by_key[k]);
  }
  std::stable_sort(out.begin(), out.end(),
                   [&](const Summary& a, const Summary& b) { return better(a.mean(), b.mean()); });
  return out;
}

const TrialRun& Tuner::measure(const Setting& searched, const std::string& role,
                               const std::function<bool()>& stop) {
  TrialRun run;
  run.index = static_cast<int>(runs_.size());
  run.setting = space_.complete(searched);
  run.key = describe(run.setting);
  run.role = role;
  const Timer timer;
  run.result = runner_.run(run.setting, stop);
  run.wall_s = timer.seconds();
  // What the optimiser knows of the searched knobs: every finished run (not an interrupted one).
  Setting told;
  for (const Space::Dim& d : space_.dims) told[d.knob->name] = run.setting.at(d.knob->name);
  if (run.result.status == TrialResult::Status::kOk) {
    optimizer_.tell(told, run.result.value);
  } else if (run.result.status != TrialResult::Status::kInterrupted) {
    optimizer_.tell(told, std::nullopt);
  }
  // Before this run joins the record: is it a new best over the incumbent's mean?
  std::string remark;
  if (run.result.status == TrialResult::Status::kOk && role != "defaults") {
    const std::vector<Summary> ranked = ranking(1);
    if (ranked.empty() || better(run.result.value, ranked.front().mean())) remark = "new best?";
  }
  runs_.push_back(run);
  if (!options_.trials_path.empty()) {
    std::ofstream f(options_.trials_path, std::ios::app);
    f << nlohmann::json{{"trial", run.index},
                        {"role", role},
                        {"setting", run.setting},
                        {"key", run.key},
                        {"status", status_name(run.result.status)},
                        {"value", run.result.status == TrialResult::Status::kOk
                                      ? nlohmann::json(run.result.value)
                                      : nlohmann::json()},
                        {"metrics", run.result.metrics},
                        {"wall_s", run.wall_s},
                        {"note", run.result.note}}
             .dump()
      << "\n";
    if (!f) throw_error("cannot append to ", options_.trials_path);
  }
  if (run.result.status == TrialResult::Status::kOk) {
    for (const Summary& s : ranking(1)) {
      if (s.key == run.key && s.values.size() > 1) {
        char text[64];
        std::snprintf(text, sizeof(text), "mean %.4g over %zu", s.mean(), s.values.size());
        remark = text;
      }
    }
  }
  if (on_run_) on_run_(runs_.back(), remark);
  return runs_.back();
}

bool Tuner::measured(const Setting& searched) const {
  const std::string key = describe(space_.complete(searched));
  for (const TrialRun& r : runs_) {
    if (r.key == key) return true;
  }
  return false;
}

std::optional<Summary> Tuner::answer(bool cut_short) const {
  // The candidates: the settings measured at least twice, and the defaults however often (a
  // setting that never beat them is no answer). Without re-measuring, every setting. A search
  // cut short (Ctrl-C, the budget) before its best was re-measured answers that best run.
  const std::string defaults_key = describe(space_.defaults());
  const int min_runs = options_.remeasure ? 2 : 1;
  const std::vector<Summary> ranked = ranking(1);
  if (ranked.empty()) return std::nullopt;
  for (const Summary& s : ranked) {
    if (static_cast<int>(s.values.size()) >= min_runs) return s;
    if (s.key == defaults_key) return cut_short ? ranked.front() : s;
  }
  return ranked.front();
}

Outcome Tuner::run(const std::function<bool()>& stop) {
  Outcome outcome;
  const Timer clock;
  // Runs kept for the confirmation: the defaults and up to two other settings measured.
  const std::string defaults_key = describe(space_.defaults());
  auto search_end = [&] {
    if (!options_.remeasure) return options_.trials;
    int others = 0;
    for (const Summary& s : ranking(1)) others += s.key != defaults_key;
    return std::max(1, options_.trials - 1 - std::min(2, others));
  };
  std::vector<double> walls;
  auto out_of_time = [&] {
    if (options_.budget_s <= 0 || walls.empty()) return false;
    std::vector<double> sorted = walls;
    std::sort(sorted.begin(), sorted.end());
    return clock.seconds() + sorted[sorted.size() / 2] > options_.budget_s;
  };
  std::optional<Setting> remeasure;
  while (static_cast<int>(runs_.size()) < search_end()) {
    if (stop()) break;
    if (out_of_time()) {
      outcome.budget_hit = true;
      break;
    }
    Setting s;
    std::string role = "search";
    if (runs_.empty()) {
      s = space_.searched_defaults;
      role = "defaults";
    } else if (remeasure) {
      s = *remeasure;
      role = "re-measure";
      remeasure.reset();
    } else if (std::optional<Setting> next = optimizer_.ask()) {
      s = *next;
      // Without re-measuring (the grid), a setting measured already (the defaults) is not run
      // twice: the grid's runs are its combinations.
      if (!options_.remeasure && measured(s)) continue;
    } else {
      outcome.exhausted = true;
      break;
    }
    const TrialRun& r = measure(s, role, stop);
    walls.push_back(r.wall_s);
    if (r.result.status == TrialResult::Status::kInterrupted) break;
    // A single run that beats every mean so far is measured again before it can lead.
    if (options_.remeasure && r.result.status == TrialResult::Status::kOk && role != "re-measure") {
      const std::vector<Summary> ranked = ranking(1);
      if (!ranked.empty() && ranked.front().key == r.key && ranked.front().values.size() == 1 &&
          runs_.size() > 1) {
        remeasure = s;
      }
    }
  }
  outcome.interrupted = stop();
  if (options_.remeasure && !outcome.interrupted && !outcome.budget_hit) {
    // Confirmation: the two best settings (by mean; a new best the search had no room to
    // re-measure among them) and the defaults, alternated.
    const std::vector<Summary> ranked = ranking(1);
    std::vector<Setting> finalists;
    for (const Summary& s : ranked) {
      if (s.key != defaults_key && finalists.size() < 2) finalists.push_back(s.setting);
    }
    std::vector<std::pair<Setting, std::string>> order;
    if (!finalists.empty()) order.emplace_back(finalists[0], "confirm");
    order.emplace_back(space_.defaults(), "confirm");
    if (finalists.size() > 1) order.emplace_back(finalists[1], "confirm");
    for (const auto& [full, role] : order) {
      if (static_cast<int>(runs_.size()) >= options_.trials || stop()) break;
      Setting searched;
      for (const Space::Dim& d : space_.dims) searched[d.knob->name] = full.at(d.knob->name);
      measure(searched, role, stop);
    }
    outcome.interrupted = stop();
  }
  outcome.runs = runs_;
  outcome.best = answer(outcome.interrupted || outcome.budget_hit);
  for (const Summary& s : ranking(1)) {
    if (s.key == describe(space_.defaults())) outcome.defaults = s;
  }
  return outcome;
}

}  // namespace bertfit::tune
