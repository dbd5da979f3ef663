// The live table and summary lines of `bertfit tune` (progress.h).
#include "tune/progress.h"

#include <algorithm>
#include <cstdio>

namespace bertfit::tune {
namespace {

std::string pad(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string figure(double v) {
  return fixed(v, std::abs(v) >= 100 ? 1 : std::abs(v) >= 10 ? 2 : 3);
}

}  // namespace

Progress::Progress(const Space& space, const Objective& objective)
    : space_(space), objective_(objective) {
  for (const Space::Dim& d : space_.dims) {
    std::size_t w = d.knob->name.size();
    for (const std::string& v : d.values) w = std::max(w, v.size());
    widths_.push_back(w);
  }
}

std::string Progress::header(int trials, const std::string& sampler) const {
  std::string h = std::string("tune ") + mode_name(space_.mode) + ": " + objective_.name + " (" +
                  objective_.unit + ", " + (objective_.minimize ? "lower" : "higher") +
                  " is better), " + std::to_string(trials) + " trials, " + sampler + ", " +
                  std::to_string(space_.dims.size()) + " knobs, " +
                  std::to_string(space_.combinations()) + " combinations\n";
  if (!space_.fixed.empty()) h += "  held: " + describe(space_.fixed) + "\n";
  for (const std::string& d : space_.dropped) h += "  dropped: " + d + "\n";
  h += "    #";
  for (std::size_t i = 0; i < space_.dims.size(); ++i) {
    h += "  " + pad(space_.dims[i].knob->name, widths_[i]);
  }
  h += "  " + pad(objective_.unit, 10) + "  note";
  return h;
}

std::string Progress::value_cell(const TrialRun& run) const {
  if (run.result.status != TrialResult::Status::kOk) return status_name(run.result.status);
  return figure(run.result.value);
}

std::string Progress::row(const TrialRun& run, const std::string& remark) const {
  char index[16];
  std::snprintf(index, sizeof(index), "%5d", run.index);
  std::string r = index;
  for (std::size_t i = 0; i < space_.dims.size(); ++i) {
    r += "  " + pad(run.setting.at(space_.dims[i].knob->name), widths_[i]);
  }
  r += "  " + pad(value_cell(run), 10) + "  ";
  std::string note = run.role == "search" ? "" : run.role;
  if (!remark.empty()) note += (note.empty() ? "" : ", ") + remark;
  if (!run.result.note.empty()) note += (note.empty() ? "" : ": ") + run.result.note;
  return r + note;
}

double speedup(const Objective& objective, double best, double defaults) {
  if (best <= 0 || defaults <= 0) return 1;
  return objective.minimize ? defaults / best : best / defaults;
}

std::string importance_line(const nlohmann::json& importance) {
  std::vector<std::pair<double, std::string>> v;
  for (const auto& [k, share] : importance.items()) v.emplace_back(share.get<double>(), k);
  std::sort(v.rbegin(), v.rend());
  std::string out;
  for (const auto& [share, k] : v) out += (out.empty() ? "" : ", ") + k + " " + fixed(share, 2);
  return out;
}

}  // namespace bertfit::tune
