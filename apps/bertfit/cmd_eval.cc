// `bertfit eval`: the task's metrics of a model on a GLUE split or a custom labelled file.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/bertfit/commands.h"
#include "apps/bertfit/option_table.h"
#include "base/error.h"
#include "base/parallel.h"
#include "data/batch.h"
#include "model/model_io.h"
#include "tokenizer/tokenizer.h"
#include "train/dataset.h"
#include "train/evaluate.h"

namespace bertfit::cli {
namespace {

struct EvalOptions {
  std::string model_dir;
  DataOptions data;
  std::string split = "dev";
  int batch_size = 32;
  int max_seq_len = 128;
  int threads = 0;
  std::string precision = "fp32";
};

void run(const EvalOptions& o) {
  if (o.threads > 0) set_num_threads(o.threads);
  if (o.data.task.empty() == o.data.dev_file.empty()) {
    throw_error("give either --task with --data, or --dev-file with its columns");
  }
  if (!o.data.task.empty() && o.data.data_dir.empty()) throw_error("--task needs --data");
  ModelState state = load_model(o.model_dir);
  WordPieceTokenizer tokenizer = WordPieceTokenizer::from_model_dir(o.model_dir);
  check_tokenizer_fits(tokenizer, state.config, o.model_dir);
  if (o.max_seq_len > state.config.max_positions) {
    throw_error("--max-seq-len ", o.max_seq_len, " exceeds max_position_embeddings ",
                state.config.max_positions);
  }
  TaskInfo task = !o.data.task.empty()
                      ? glue_task_info(o.data.task)
                      : custom_task_info(state.config.is_regression(), state.config.id2label);
  const int needed = task.regression ? 1 : static_cast<int>(task.label_names.size());
  if (state.config.num_labels != needed) {
    throw_error(o.model_dir, ": the model has num_labels = ", state.config.num_labels,
                " but the task needs ", needed);
  }
  LoadedExamples examples = load_eval_examples(o.data, o.split, task);
  auto encoded = encode_examples(tokenizer, examples.examples, o.max_seq_len);
  BertModel model(state.config, state.layout, parse_precision(o.precision));
  EvalResult r = evaluate(model, state.params.data(), encoded, task, o.batch_size, 8);
  nlohmann::json j{{"task", task.name},
                   {"split", o.data.task.empty() ? "dev" : o.split},
                   {"examples", r.examples},
                   {"eval_loss", r.loss}};
  for (auto& [name, value] : r.metrics) j["eval_" + name] = value;
  std::printf("%s\n", j.dump().c_str());
}

void setup(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Print a model's metrics as JSON on a GLUE split (--task T --data DIR [--split "
      "dev]) or a labelled file (--dev-file F --text-a-column C [--text-b-column C] "
      "--label-column C).");
  cmd->add_option("--model", o->model_dir, "Model folder")->required();
  add_option_table(*cmd, data_option_table(o->data), {"--train-file", "--regression"});
  cmd->add_option("--split", o->split, "GLUE split (dev, dev_matched, dev_mismatched, train)")
      ->capture_default_str();
  cmd->add_option("--batch-size", o->batch_size, "Examples per forward pass")
      ->capture_default_str();
  cmd->add_option("--max-seq-len", o->max_seq_len, "Truncate examples to this many tokens")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "Compute threads (default: all cores)");
  cmd->add_option("--precision", o->precision, "Matrix products in fp32 or bf16")
      ->capture_default_str();
  cmd->callback([o] { run(*o); });
}

CommandRegistrar registrar(50, setup);

}  // namespace
}  // namespace bertfit::cli
