// `bertfit train`: fine-tune a model on a GLUE task or custom files (train/trainer.h). A Hub
// repository id as --model is resolved to its folder here; the run saves and compares --model as
// given (train/options.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/bertfit/cli_flags.h"
#include "apps/bertfit/commands.h"
#include "apps/bertfit/model_source.h"
#include "base/error.h"
#include "flags/groups.h"
#include "train/trainer.h"

namespace bertfit::cli {
void add_train_command(CLI::App& app) {
  auto options = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Fine-tune a model (a folder or a Hub repository id) on a GLUE task (--task T --data DIR) or "
      "custom files "
      "(--train-file F [--dev-file F] --text-a-column C [--text-b-column C] --label-column C); "
      "a sentence embedder (a sentence-transformers folder or --objective embedding) on rows of "
      "texts, evaluated on scored pairs (--dev-file) or a retrieval set (--queries, --corpus, "
      "--qrels; the best model by eval_cosine_ndcg@10 unless --metric-for-best-model). "
      "Writes the fine-tuned model (HF layout), metrics.jsonl and a resumable checkpoint/ to "
      "--output. A sentence-transformers folder (or --objective embedding) trains sentence "
      "embeddings on rows of texts (--text-a-column anchor, --text-b-column positive, "
      "--negative-columns, or --label-column scores: --loss) and is saved as a "
      "sentence-transformers folder; --dev-file scored pairs are evaluated by Spearman.");
  add_flags(*cmd, train_flags(*options));
  // Not one of the run's saved options (train_flags): what it sets is saved as those flags.
  auto tuned_config = std::make_shared<std::string>();
  add_flags(*cmd, tuned_config_flags(*tuned_config));
  cmd->get_option("--model")->required();
  cmd->get_option("--output")->required();
  cmd->callback([options, cmd, tuned_config] {
    options->max_seq_len_given = cmd->get_option("--max-seq-len")->count() > 0;
    try {
      validate_train_options(*options);  // a mistyped flag fails before a download
    } catch (const Error& e) {
      throw JobError(e.what());  // the same on every rank of an mpirun: reported once
    }
    options->resolved_model = resolve_model_flag(options->model_dir, options->revision);
    TrainSummary s = run_training(*options);
    if (s.rank != 0) return;  // rank 0 reports for a data-parallel run
    if (s.already_finished) {
      std::printf("%s\n",
                  nlohmann::json{{"steps", s.steps}, {"already_finished", true}}.dump().c_str());
      return;
    }
    nlohmann::json j{{"steps", s.steps},
                     {"train_seconds", s.seconds},
                     {"train_samples_per_s", s.samples_per_second},
                     {"final_loss", s.final_loss}};
    for (auto& [name, value] : s.dev_metrics) j["eval_" + name] = value;
    if (s.best_step) j["best_step"] = *s.best_step;
    if (s.stopped_early) j["stopped_early"] = true;
    std::printf("%s\n", j.dump().c_str());
  });
}

}  // namespace bertfit::cli
