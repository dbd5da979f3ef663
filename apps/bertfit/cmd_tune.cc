// `bertfit tune serve|infer|train`: finds this machine's fastest settings of a command by
// measuring real runs of this binary (src/tune): each trial a fresh process with one setting of
// the knobs (threads and processes, OpenMP's wait policy and binding, the allocator, precision,
// batch sizes), proposed by optuna's TPE (or the grid, or random draws), new bests re-measured,
// the answer the best mean. Prints the trials as they run (stderr), writes OUTPUT/trials.jsonl
// and OUTPUT/tuned.json (for `--config`), and one JSON summary line (stdout).
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "apps/bertfit/cli_flags.h"
#include "apps/bertfit/commands.h"
#include "apps/bertfit/model_source.h"
#include "base/error.h"
#include "base/interrupt.h"
#include "flags/groups.h"
#include "tune/optimizer.h"
#include "tune/progress.h"
#include "tune/trials.h"
#include "tune/tuned_file.h"

namespace bertfit::cli {
namespace {

using tune::TuneMode;

enum class Sampler { kTpe, kRandom, kGrid };

struct TuneOptions {
  std::optional<TuneMode> mode;
  std::string model_dir, revision = "main", objective, output = "tuned";
  int trials = 0, seed = 1, seq_len = 0, concurrency = 1;  // trials 0: 20, the grid's all
  double budget_s = 0, measure_s = 3, warmup_s = 1, trial_timeout = 300;
  Sampler sampler = Sampler::kTpe;
  std::vector<std::string> fixes;
  std::string input;                 // serve: a text file, one request's text per line
  std::vector<std::string> compare;  // tuned files to measure in turn instead of searching
  int rounds = 3;
  bool show_space = false, overwrite = false;
};

tune::Objective objective_of(TuneMode mode, const std::string& name) {
  const std::string m = tune::mode_name(mode);
  if (mode == TuneMode::kServe) {
    if (name.empty() || name == "latency-p50") return {"latency-p50", "ms", true};
    if (name == "latency-p99") return {"latency-p99", "ms", true};
    if (name == "throughput") return {"throughput", "req/s", false};
  } else if (mode == TuneMode::kInfer) {
    if (name.empty() || name == "throughput" || name == "samples-per-s") {
      return {"throughput", "samples/s", false};
    }
    if (name == "latency-p50") return {"latency-p50", "ms", true};
  } else if (name.empty() || name == "samples-per-s" || name == "throughput") {
    return {"samples-per-s", "samples/s", false};
  }
  const char* accepted = mode == TuneMode::kServe   ? "latency-p50, latency-p99 or throughput"
                         : mode == TuneMode::kInfer ? "throughput (samples-per-s) or latency-p50"
                                                    : "samples-per-s";
  throw_error("--objective ", name, ": tune ", m, " measures ", accepted);
}

// Removes `--flag V` / `--flag=V` from args; the value, or "" when absent.
std::string take_flag(std::vector<std::string>& args, const std::string& flag) {
  std::string value;
  for (std::size_t i = 0; i < args.size();) {
    if (args[i] == flag && i + 1 < args.size()) {
      value = args[i + 1];
      args.erase(args.begin() + i, args.begin() + i + 2);
    } else if (args[i].rfind(flag + "=", 0) == 0) {
      value = args[i].substr(flag.size() + 1);
      args.erase(args.begin() + i);
    } else {
      ++i;
    }
  }
  return value;
}

int positive_int(const std::string& text, const std::string& flag, int fallback) {
  if (text.empty()) return fallback;
  try {
    std::size_t used = 0;
    const int v = std::stoi(text, &used);
    if (used == text.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  throw_error(flag, " ", text, ": give a positive number");
}

// The request texts of serve trials: the file's lines, or one text of seq_len words.
std::vector<std::string> serve_texts(const TuneOptions& o) {
  std::vector<std::string> texts;
  if (!o.input.empty()) {
    std::ifstream f(o.input);
    if (!f) throw_error("--input ", o.input, ": cannot read it");
    for (std::string line; std::getline(f, line);) {
      if (!line.empty()) texts.push_back(line);
    }
    if (texts.empty()) throw_error("--input ", o.input, ": no text in it");
    return texts;
  }
  static const char* words[] = {"the",  "service", "was", "quick", "and",  "the",  "staff",
                                "kind", "but",     "the", "room",  "felt", "small"};
  std::string text;
  for (int i = 0; i < o.seq_len; ++i) text += std::string(i ? " " : "") + words[i % 13];
  return {text};
}

void prepare_output(const TuneOptions& o) {
  namespace fs = std::filesystem;
  for (const char* name : {"tuned.json", "trials.jsonl"}) {
    if (fs::exists(fs::path(o.output) / name) && !o.overwrite) {
      throw_error("--output ", o.output, ": holds ", name,
                  " of an earlier tune; pass --overwrite-output-dir to replace it");
    }
  }
  fs::create_directories(fs::path(o.output) / "trials");
  fs::remove(fs::path(o.output) / "trials.jsonl");
  fs::remove(fs::path(o.output) / "tuned.json");
}

nlohmann::json space_json(const tune::Space& space) {
  nlohmann::json knobs = nlohmann::json::object();
  for (const tune::Space::Dim& d : space.dims) knobs[d.knob->name] = d.values;
  return {{"mode", tune::mode_name(space.mode)},
          {"knobs", knobs},
          {"held", space.fixed},
          {"defaults", space.defaults()},
          {"dropped", space.dropped},
          {"combinations", space.combinations()}};
}

std::string command_word(TuneMode mode) {
  return mode == TuneMode::kServe ? "serve" : mode == TuneMode::kInfer ? "predict" : "train";
}

// The equivalent command line of a setting (one process, or how to start several).
std::string equivalent_command(TuneMode mode, const tune::Setting& best,
                               const tune::SpaceContext& context, const std::string& model,
                               const std::vector<std::string>& passed) {
  const tune::Launch launch = tune::launch_of(best, context);
  std::string one =
      tune::command_line(launch, "bertfit " + command_word(mode) + " --model " + model);
  for (const std::string& word : passed) one += " " + word;  // train's data and head flags
  if (launch.processes <= 1) return one;
  if (mode == TuneMode::kTrain) {
    return "mpirun -np " + std::to_string(launch.processes) + " " + one;
  }
  return std::to_string(launch.processes) + " processes, each on its own " +
         std::to_string(launch.threads) + " core(s) (taskset -c CORES): " + one;
}

void finish(const TuneOptions& o, TuneMode mode, const tune::Space& space,
            const tune::Objective& objective, tune::Optimizer& optimizer,
            const tune::Outcome& outcome, const tune::Machine& machine,
            const tune::SpaceContext& context, const std::vector<std::string>& passed) {
  const std::size_t runs = outcome.runs.size();
  if (!outcome.best) {
    if (outcome.interrupted) {
      throw Error(cat("stopped after ", runs, " trial(s), none finished; nothing written but ",
                      o.output, "/trials.jsonl"),
                  130);
    }
    std::string first = "no trial ran";
    for (const tune::TrialRun& r : outcome.runs) {
      if (!r.result.note.empty()) {
        first = r.result.note;
        break;
      }
    }
    throw_error("every trial failed (", runs, " in ", o.output,
                "/trials.jsonl); the first: ", first);
  }
  nlohmann::json importance = nlohmann::json::object();
  std::string importance_note;
  if (o.sampler == Sampler::kTpe) {
    try {
      importance = optimizer.importance();
    } catch (const Error& e) {
      importance_note = e.what();
    }
  } else {
    std::vector<std::pair<tune::Setting, double>> measured;
    for (const tune::TrialRun& r : outcome.runs) {
      if (r.result.status != tune::TrialResult::Status::kOk) continue;
      tune::Setting searched;
      for (const tune::Space::Dim& d : space.dims)
        searched[d.knob->name] = r.setting.at(d.knob->name);
      measured.emplace_back(searched, r.result.value);
    }
    importance = tune::fanova_importance(space, measured, objective.minimize,
                                         static_cast<unsigned>(o.seed), importance_note);
  }
  const tune::Summary& best = *outcome.best;
  nlohmann::json measured{
      {"best", {{"mean", best.mean()}, {"runs", best.values.size()}, {"values", best.values}}}};
  double gain = 1;
  if (outcome.defaults && !outcome.defaults->values.empty()) {
    gain = tune::speedup(objective, best.mean(), outcome.defaults->mean());
    measured["defaults"] = {{"mean", outcome.defaults->mean()},
                            {"runs", outcome.defaults->values.size()},
                            {"values", outcome.defaults->values}};
    measured["speedup"] = gain;
  }
  tune::TunedFile file;
  file.command = tune::mode_name(mode);
  file.objective = objective.name;
  file.unit = objective.unit;
  file.model = o.model_dir;
  file.context = context;
  file.settings = best.setting;
  file.machine = {{"cpu", machine.cpu},
                  {"cores", machine.cores},
                  {"vnni", machine.int8},
                  {"native_bf16", machine.bf16}};
  file.measured = measured;
  file.importance = importance;
  file.command_line = equivalent_command(mode, best.setting, context, o.model_dir, passed);
  const std::string tuned_path = (std::filesystem::path(o.output) / "tuned.json").string();
  tune::write_tuned_file(tuned_path, file);

  std::string runs_text = std::to_string(best.values.size()) + " run" +
                          (best.values.size() == 1 ? ", not re-measured" : "s");
  std::fprintf(stderr, "best: %s\n  %s: %.4g %s (mean of %s, spread %.1f%%)\n",
               tune::describe(best.setting).c_str(), objective.name.c_str(), best.mean(),
               objective.unit.c_str(), runs_text.c_str(), best.spread() * 100);
  if (outcome.defaults) {
    std::fprintf(stderr, "  defaults: %.4g %s (%zu runs): the best is %+.1f%% %s\n",
                 outcome.defaults->mean(), objective.unit.c_str(), outcome.defaults->values.size(),
                 (gain - 1) * 100, objective.minimize ? "faster" : "higher");
  }
  if (!importance.empty()) {
    std::fprintf(stderr, "  importance: %s\n", tune::importance_line(importance).c_str());
  } else if (!importance_note.empty()) {
    std::fprintf(stderr, "  importance: not computed (%s)\n", importance_note.c_str());
  }
  std::fprintf(stderr, "  wrote %s and %s/trials.jsonl\n  as a command: %s\n", tuned_path.c_str(),
               o.output.c_str(), file.command_line.c_str());
  std::fprintf(stderr, "  or: bertfit %s --config %s ...\n", command_word(mode).c_str(),
               tuned_path.c_str());
  nlohmann::json j{{"mode", tune::mode_name(mode)},
                   {"objective", objective.name},
                   {"unit", objective.unit},
                   {"best", best.setting},
                   {"value", best.mean()},
                   {"runs", best.values.size()},
                   {"trials", runs},
                   {"importance", importance},
                   {"tuned", tuned_path}};
  if (outcome.defaults) {
    j["defaults_value"] = outcome.defaults->mean();
    j["speedup"] = gain;
  }
  if (outcome.budget_hit) j["budget_hit"] = true;
  if (outcome.interrupted) j["interrupted"] = true;
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
  if (outcome.interrupted) {
    const int sig = InterruptGuard::signal() != 0 ? InterruptGuard::signal() : SIGINT;
    throw Error(cat("stopped after ", runs, " trial(s); the best so far is in ", tuned_path),
                128 + sig);
  }
}

// --compare: the settings of tuned files measured in turn, --rounds times (so that a shared
// machine's drift hits them alike); each file's runs and mean.
void compare(const TuneOptions& o, TuneMode mode, const tune::Objective& objective,
             const tune::Machine& machine, tune::TrialRunner& runner, const std::string& work) {
  if (o.rounds < 1) throw_error("--rounds ", o.rounds, ": give at least 1");
  std::vector<tune::Setting> settings;
  for (const std::string& path : o.compare) {
    const tune::TunedFile f = tune::read_tuned_file(path, machine, "--compare");
    if (f.command != tune::mode_name(mode)) {
      throw_error("--compare ", path, ": tuned for ", f.command, ", not ", tune::mode_name(mode));
    }
    settings.push_back(f.settings);
  }
  std::filesystem::create_directories(work);
  std::vector<std::vector<double>> values(settings.size());
  std::vector<int> failed(settings.size(), 0);
  const InterruptGuard interrupts;
  const auto stop = [] { return InterruptGuard::requested(); };
  for (int round = 0; round < o.rounds && !stop(); ++round) {
    for (std::size_t i = 0; i < settings.size() && !stop(); ++i) {
      const tune::TrialResult r = runner.run(settings[i], stop);
      if (r.status == tune::TrialResult::Status::kOk) {
        values[i].push_back(r.value);
        std::fprintf(stderr, "round %d  %s  %.4g %s\n", round + 1, o.compare[i].c_str(), r.value,
                     objective.unit.c_str());
      } else if (r.status != tune::TrialResult::Status::kInterrupted) {
        ++failed[i];
        std::fprintf(stderr, "round %d  %s  %s: %s\n", round + 1, o.compare[i].c_str(),
                     tune::status_name(r.status), r.note.c_str());
      }
    }
  }
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t i = 0; i < settings.size(); ++i) {
    tune::Summary s;
    s.values = values[i];
    nlohmann::json row{{"file", o.compare[i]},
                       {"setting", settings[i]},
                       {"values", values[i]},
                       {"failed", failed[i]}};
    if (!values[i].empty()) row["mean"] = s.mean();
    rows.push_back(row);
  }
  std::printf(
      "%s\n",
      nlohmann::json{{"objective", objective.name}, {"unit", objective.unit}, {"compare", rows}}
          .dump()
          .c_str());
  if (stop()) {
    throw Error("stopped during --compare; the rounds so far are printed",
                128 + (InterruptGuard::signal() != 0 ? InterruptGuard::signal() : SIGINT));
  }
}

void run(TuneOptions o, const std::vector<std::string>& passed) {
  const TuneMode mode = *o.mode;
  if (mode != TuneMode::kTrain && !passed.empty()) {
    throw_error("unknown flag ", passed.front(), " for tune ", tune::mode_name(mode),
                " (only tune train passes flags on, to train)");
  }
  if (o.trials < 0) throw_error("--trials ", o.trials, ": give at least 1");
  if (o.measure_s <= 0 || o.warmup_s < 0 || o.trial_timeout <= 0 || o.budget_s < 0) {
    throw_error(
        "--measure-s and --trial-timeout must be positive, --warmup-s and --budget-s "
        "not negative");
  }
  if (o.concurrency < 1 || o.concurrency > 256) {
    throw_error("--concurrency ", o.concurrency, ": give 1 to 256");
  }
  if (o.seq_len == 0) o.seq_len = mode == TuneMode::kServe ? 64 : 128;
  const tune::Objective objective = objective_of(mode, o.objective);
  std::vector<std::string> extra = passed;
  tune::SpaceContext context;
  if (mode == TuneMode::kTrain) {
    // The step's global batch stays the user's: micro_batch and ranks only split it.
    const int batch = positive_int(take_flag(extra, "--batch-size"), "--batch-size", 32);
    const int accum = positive_int(take_flag(extra, "--grad-accum"), "--grad-accum", 1);
    context.global_batch = batch * accum;
  }
  if (o.model_dir.empty() && !o.show_space) {
    throw_error("--model is required (unless --show-space)");
  }
  tune::TrialConfig config;
  if (!o.model_dir.empty()) {
    config.model = resolve_model_flag(o.model_dir, o.revision);  // once: trials never download
    // serve's --max-batch-tokens must hold the model's longest input.
    std::ifstream f(std::filesystem::path(config.model) / "config.json");
    const nlohmann::json c = nlohmann::json::parse(f, nullptr, false);
    if (c.is_object() && c.contains("max_position_embeddings")) {
      context.max_tokens = c["max_position_embeddings"].get<int>();
    }
  }
  const tune::Machine machine = tune::Machine::detect();
  const tune::Space space = tune::build_space(mode, machine, context, o.fixes);
  if (o.show_space) {
    std::printf("%s\n", space_json(space).dump().c_str());
    return;
  }
  if (o.trials == 0) {
    o.trials = o.sampler == Sampler::kGrid
                   ? static_cast<int>(std::min<long>(space.combinations(), 1 << 20))
                   : 20;
  }
  config.binary = tune::self_binary();
  config.extra = extra;
  config.work_dir = (std::filesystem::path(o.output) / "trials").string();
  config.objective = objective;
  config.context = context;
  config.warmup_s = o.warmup_s;
  config.measure_s = o.measure_s;
  config.timeout_s = o.trial_timeout;
  config.seq_len = o.seq_len;
  config.concurrency = o.concurrency;
  if (mode == TuneMode::kServe) {
    config.texts = serve_texts(o);
    if (std::filesystem::exists(std::filesystem::path(config.model) / "modules.json")) {
      config.target = "/embed";  // a sentence embedder
    }
  }
  std::unique_ptr<tune::TrialRunner> runner =
      mode == TuneMode::kServe   ? tune::make_serve_runner(config)
      : mode == TuneMode::kInfer ? tune::make_infer_runner(config)
                                 : tune::make_train_runner(config);
  if (!o.compare.empty()) {
    compare(o, mode, objective, machine, *runner, config.work_dir);
    return;
  }
  prepare_output(o);
  std::unique_ptr<tune::Optimizer> optimizer;
  const unsigned seed = static_cast<unsigned>(o.seed);
  if (o.sampler == Sampler::kGrid) {
    optimizer = tune::make_grid_optimizer(space);
  } else if (o.sampler == Sampler::kRandom) {
    optimizer = tune::make_random_optimizer(space, seed);
  } else {
    optimizer = tune::make_tpe_optimizer(space, objective.minimize, seed, 6);
  }
  const bool grid = o.sampler == Sampler::kGrid;
  const tune::Progress progress(space, objective);
  std::fprintf(stderr, "%s\n", progress.header(o.trials, optimizer->name()).c_str());
  const InterruptGuard interrupts;  // Ctrl-C: the running trial is killed, the best so far kept
  tune::Tuner tuner(space, objective, *optimizer, *runner,
                    {.trials = o.trials,
                     .budget_s = o.budget_s,
                     .remeasure = !grid,
                     .trials_path = (std::filesystem::path(o.output) / "trials.jsonl").string()},
                    [&](const tune::TrialRun& r, const std::string& remark) {
                      std::fprintf(stderr, "%s\n", progress.row(r, remark).c_str());
                    });
  const tune::Outcome outcome = tuner.run([] { return InterruptGuard::requested(); });
  finish(o, mode, space, objective, *optimizer, outcome, machine, context, extra);
}

}  // namespace
}  // namespace bertfit::cli

namespace bertfit::cli {

void add_tune_command(CLI::App& app) {
  auto o = std::make_shared<TuneOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "Find this machine's fastest settings for serve (latency or throughput), inference "
      "(predict, embed, bench: throughput) or train (samples/s) by measuring real runs of "
      "this binary, each a fresh process, with optuna's TPE (python3-optuna); prints the trials "
      "as they run and writes OUTPUT/tuned.json for --config and OUTPUT/trials.jsonl. tune train "
      "passes every flag it does not know on to train (the data and head flags).");
  add_flags(*cmd, {{"mode", "What to tune: serve, infer or train",
                    choice_target(o->mode, {{"serve", TuneMode::kServe},
                                            {"infer", TuneMode::kInfer},
                                            {"train", TuneMode::kTrain}})}});
  add_flags(*cmd, model_flags(o->model_dir, o->revision));
  add_flags(
      *cmd,
      {{"--objective",
        "serve: latency-p50 (default), latency-p99 or throughput; infer: throughput (default, "
        "samples-per-s) or latency-p50; train: samples-per-s",
        &o->objective},
       {"--trials",
        "Measured runs in all, re-measurements and the final confirmation included; 0: 20, or "
        "every combination for the grid",
        &o->trials},
       {"--budget-s",
        "Stop searching when the next trial would end past this many seconds; 0: no limit",
        &o->budget_s},
       {"--sampler", "tpe (optuna's TPE), random or grid (every combination once, no re-measuring)",
        choice_target(
            o->sampler,
            {{"tpe", Sampler::kTpe}, {"random", Sampler::kRandom}, {"grid", Sampler::kGrid}})},
       {"--seed", "Seed of the sampler", &o->seed},
       {"--fix",
        "KNOB=VALUE holds a knob, KNOB=V1,V2 restricts it (repeatable; --show-space lists them)",
        &o->fixes},
       {"--show-space",
        "Print the knobs, their values here, what dropped out and the "
        "combinations, as JSON, and exit",
        &o->show_space},
       {"--output", "Folder of tuned.json and trials.jsonl", &o->output},
       {"--overwrite-output-dir",
        "Replace the tuned.json and trials.jsonl of an earlier tune in --output", &o->overwrite},
       {"--measure-s", "Seconds each trial is measured (serve: the load; infer: the timed window)",
        &o->measure_s},
       {"--warmup-s", "serve: seconds of load before the measured window", &o->warmup_s},
       {"--trial-timeout",
        "Seconds a trial may take in all before it is killed and recorded as a timeout",
        &o->trial_timeout},
       {"--seq-len", "infer: tokens per sequence (128); serve: words of the request text (64)",
        &o->seq_len},
       {"--concurrency", "serve: connections of the closed-loop load (1)", &o->concurrency},
       {"--input", "serve: a text file, one request's text per line (instead of the generated one)",
        &o->input},
       {"--compare",
        "Instead of searching, measure the settings of these tuned.json files in turn, --rounds "
        "times, and print each one's runs and mean",
        &o->compare},
       {"--rounds", "--compare: rounds of measuring every file once", &o->rounds}});
  cmd->get_option("mode")->required();
  cmd->allow_extras();
  cmd->callback([o, cmd] { run(*o, cmd->remaining()); });
}

}  // namespace bertfit::cli
