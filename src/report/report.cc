// The run report page and Trainer-style TensorBoard tags (see report.h).
#include "report/report.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "base/error.h"
#include "base/file.h"
#include "report/svg_chart.h"

namespace bertfit::report {
namespace {

using nlohmann::json;

const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

double number_or_nan(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : NAN;
}

Series series_of(const std::vector<json>& records, const char* x_key, const std::string& y_key,
                 const std::string& name, const std::string& color, bool markers) {
  Series s{name, color, {}, markers};
  for (const json& r : records) {
    s.points.emplace_back(number_or_nan(r, x_key), number_or_nan(r, y_key.c_str()));
  }
  return s;
}

std::string value_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v.get<double>());
    return buf;
  }
  return v.dump();
}

const char* kStyle = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:24px 0 8px}
.sub{color:#666;margin-bottom:16px}
.charts{display:flex;flex-wrap:wrap;gap:16px}
.chart{background:#fafafa;border:1px solid #e4e4e4;border-radius:4px}
.chart .title{font-size:14px;font-weight:600;fill:#222}
.chart .tick,.chart .legend,.chart .label{font-size:11px;fill:#555}
.chart .grid{stroke:#e6e6e6;stroke-width:1}
.chart .frame{fill:none;stroke:#bbb}
.chart .best{stroke:#2ca02c;stroke-width:1.5;stroke-dasharray:5 4}
.chart .best-label{font-size:11px;fill:#2ca02c}
.chart .empty{font-size:13px;fill:#999}
table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}th{background:#f2f2f2}
)";

}  // namespace

RunRecords read_run(const std::string& run_dir) {
  const std::string path = join_path(run_dir, "metrics.jsonl");
  if (!std::filesystem::is_regular_file(path)) {
    throw_error(run_dir,
                " is not a training run: it has no metrics.jsonl (the --output of "
                "`bertfit train`)");
  }
  RunRecords run;
  std::istringstream in(read_file(path));
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json r = json::parse(line, nullptr, false);
    if (r.is_discarded() || !r.is_object()) {
      throw_error(path, ":", line_no, ": not a JSON object");
    }
    if (r.value("final", false)) {
      run.final = std::move(r);
      continue;
    }
    // A record after a final one: the run was extended (train --resume with a larger
    // --max-steps); that final record was the shorter run's.
    if (r.contains("split")) {
      run.evals.push_back(std::move(r));
      run.final = nullptr;
    } else if (r.contains("step") && r.contains("loss")) {
      run.steps.push_back(std::move(r));
      run.final = nullptr;
    }
  }
  if (run.steps.empty() && run.evals.empty() && run.final.is_null()) {
    throw_error(path, ": no training record yet");
  }
  const std::string state = join_path(join_path(run_dir, "checkpoint"), "trainer_state.json");
  if (std::filesystem::is_regular_file(state)) {
    json s = json::parse(read_file(state), nullptr, false);
    if (!s.is_discarded() && s.contains("options")) run.settings = s["options"];
  }
  return run;
}

std::optional<std::int64_t> best_step(const RunRecords& run) {
  if (run.final.is_object() && run.final.contains("best_step")) {
    return run.final["best_step"].get<std::int64_t>();
  }
  std::optional<std::int64_t> best;
  double lowest = INFINITY;
  for (const json& e : run.evals) {
    const double loss = number_or_nan(e, "eval_loss");
    if (std::isfinite(loss) && loss < lowest && e.contains("step")) {
      lowest = loss;
      best = e["step"].get<std::int64_t>();
    }
  }
  return best;
}

std::string render_report(const RunRecords& run, const std::string& title) {
  std::optional<Marker> marker;
  if (auto best = best_step(run)) {
    marker = Marker{static_cast<double>(*best), "best: step " + std::to_string(*best)};
  }
  // Evaluations by split, and every eval_ metric in them.
  std::map<std::string, std::vector<json>> by_split;
  std::vector<std::string> metrics;
  for (const json& e : run.evals) {
    by_split[e.value("split", std::string("dev"))].push_back(e);
    for (const auto& [key, value] : e.items()) {
      if (key.rfind("eval_", 0) == 0 && key != "eval_loss" && key != "eval_examples" &&
          value.is_number() && std::find(metrics.begin(), metrics.end(), key) == metrics.end()) {
        metrics.push_back(key);
      }
    }
  }
  std::string charts;
  std::vector<Series> loss{
      series_of(run.steps, "step", "loss", "training loss", kPalette[0], false)};
  int colour = 1;
  for (const auto& [split, evals] : by_split) {
    loss.push_back(
        series_of(evals, "step", "eval_loss", split + " loss", kPalette[colour++ % 8], true));
  }
  charts += line_chart("Loss", "step", loss, marker);
  charts +=
      line_chart("Learning rate", "step",
                 {series_of(run.steps, "step", "lr", "learning rate", kPalette[0], false)}, marker);
  for (const std::string& m : metrics) {
    std::vector<Series> s;
    colour = 1;
    for (const auto& [split, evals] : by_split) {
      s.push_back(series_of(evals, "step", m, split, kPalette[colour++ % 8], true));
    }
    charts += line_chart(m.substr(5), "step", s, marker);
  }
  charts += line_chart(
      "Throughput (samples/s since the start)", "step",
      {series_of(run.steps, "step", "samples_per_s", "samples/s", kPalette[4], false)}, marker);
  charts += line_chart("Gradient norm", "step",
                       {series_of(run.steps, "step", "grad_norm", "grad norm", kPalette[3], false)},
                       marker);

  std::string page = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" +
                     html_escape(title) + "</title><style>" + kStyle + "</style></head><body>";
  page += "<h1>" + html_escape(title) + "</h1><div class=\"sub\">" +
          std::to_string(run.steps.size()) + " logged steps, " + std::to_string(run.evals.size()) +
          " evaluations" + (run.final.is_object() ? ", finished" : ", not finished") +
          (marker ? "; " + html_escape(marker->label) : "") + "</div>";
  page += "<div class=\"charts\">" + charts + "</div>";
  auto table = [](const std::string& heading, const json& object) {
    std::string t = "<h2>" + heading + "</h2><table><tr><th>name</th><th>value</th></tr>";
    for (const auto& [key, value] : object.items()) {
      t += "<tr><td>" + html_escape(key) + "</td><td>" + html_escape(value_text(value)) +
           "</td></tr>";
    }
    return t + "</table>";
  };
  if (run.final.is_object()) page += table("Result", run.final);
  if (run.settings.is_object()) page += table("Settings", run.settings);
  page += "</body></html>\n";
  return page;
}

std::optional<std::string> tensorboard_tag(const std::string& key, const std::string& split) {
  static const std::map<std::string, std::string> kTrain = {
      {"loss", "train/loss"},
      {"lr", "train/learning_rate"},
      {"epoch", "train/epoch"},
      {"grad_norm", "train/grad_norm"},
      {"samples_per_s", "train/samples_per_second"},
      {"train_seconds", "train/train_runtime"},
      {"train_samples_per_s", "train/train_samples_per_second"}};
  if (key.rfind("eval_", 0) == 0) {
    if (key == "eval_examples") return std::nullopt;
    const std::string prefix = split.empty() || split == "dev" ? "eval/" : "eval_" + split + "/";
    return prefix + key.substr(5);
  }
  auto it = kTrain.find(key);
  if (it == kTrain.end()) return std::nullopt;
  return it->second;
}

void write_tensorboard_record(EventWriter& writer, const json& record, double wall_time) {
  const bool final = record.value("final", false);
  const std::int64_t step =
      record.contains("step") ? record["step"].get<std::int64_t>() : record.value("steps", 0);
  const std::string split = record.value("split", std::string());
  for (const auto& [key, value] : record.items()) {
    if (!value.is_number()) continue;
    if (final && key.rfind("eval_", 0) == 0) continue;  // the last evaluation's, already written
    if (final && key == "loss") continue;
    if (auto tag = tensorboard_tag(key, split)) {
      writer.scalar(*tag, step, value.get<double>(), wall_time);
    }
  }
  writer.flush();
}

}  // namespace bertfit::report
