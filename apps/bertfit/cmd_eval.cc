// `bertfit eval`: the task's metrics of a model on a GLUE split or a custom labelled file.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/bertfit/cli_flags.h"
#include "apps/bertfit/commands.h"
#include "apps/bertfit/inference.h"
#include "base/error.h"
#include "base/parallel.h"
#include "data/batch.h"
#include "model/model_io.h"
#include "task/dataset.h"
#include "task/evaluate.h"
#include "task/pair_data.h"
#include "task/tagged_data.h"
#include "tokenizer/tokenizer.h"

namespace bertfit::cli {
namespace {

struct EvalOptions {
  InferenceOptions model;
  DataOptions data;
  std::string split = "dev";
};

void run(const EvalOptions& o) {
  if (o.data.task.empty() == o.data.dev_file.empty()) {
    throw_error("give either --task with --data, or --dev-file with its columns");
  }
  if (!o.data.task.empty() && o.data.data_dir.empty()) throw_error("--task needs --data");
  InferenceModel m = load_for_inference(o.model);
  const ModelState& state = m.state;
  const int max_seq_len = o.model.compute.max_seq_len;
  const bool tagged = !o.data.dev_file.empty() && is_tagged_data(o.data, o.data.dev_file);
  std::vector<EncodedExample> encoded;
  TaskInfo task;
  if (state.config.head == HeadKind::kEmbedding) {
    // A sentence embedder: how its cosine similarities rank scored pairs.
    if (o.data.dev_file.empty()) {
      throw_error(o.model.model_dir, " is a sentence embedder: give --dev-file with scored pairs ",
                  "(--text-a-column, --text-b-column, --label-column)");
    }
    const PairSet pairs = load_scored_pairs(o.data, o.data.dev_file);
    encoded = encode_examples(*m.tokenizer, pairs.texts, max_seq_len);
    report_truncation(pairs.path, encoded, max_seq_len);
    task = embedding_task_info();
  }
  const bool token_model = state.config.head == HeadKind::kTokenClassification;
  if (task.head != HeadKind::kEmbedding && tagged != token_model) {
    throw_error(o.model.model_dir, " is a ", head_kind_name(state.config.head), " model (",
                state.config.family->class_for(state.config.head), ") but ",
                o.data.task.empty() ? o.data.dev_file : "--task",
                tagged ? " holds tagged words (token classification)"
                       : " holds labelled texts (sequence classification)");
  }
  if (token_model) {
    task = model_task_info(state.config);
    const LoadedTagged dev = load_eval_tagged(o.data, task);
    encoded = encode_tagged(*m.tokenizer, dev, task.label_names, max_seq_len);
    report_word_truncation(dev.path, encoded, max_seq_len);
  } else if (task.head != HeadKind::kEmbedding) {
    // A GLUE task's labels come from the task table, in the model's order when it holds them in
    // another; custom data is read as the model was fine-tuned (its problem type and label names).
    task = !o.data.task.empty() ? in_model_label_order(glue_task_info(o.data.task), state.config)
                                : model_task_info(state.config);
    check_model_fits_task(state.config, task, o.model.model_dir);
    LoadedExamples examples = load_eval_examples(o.data, o.split, task);
    encoded = encode_examples(*m.tokenizer, examples.examples, max_seq_len);
    report_truncation(examples.path, encoded, max_seq_len);
  }
  BertModel model(state.config, state.layout, m.precision);
  EvalResult r = evaluate(model, state.params.data(), encoded, task, o.model.compute.batch_size, 8,
                          progress_reporter("eval"));
  nlohmann::json j{{"task", task.name},
                   {"split", o.data.task.empty() ? "dev" : o.split},
                   {"examples", r.examples}};
  if (!std::isnan(r.loss)) j["eval_loss"] = r.loss;  // the similarity evaluation has none
  for (auto& [name, value] : r.metrics) j["eval_" + name] = value;
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Print a model's metrics as JSON on a GLUE split (--task T --data DIR [--split "
      "dev]), a labelled file (--dev-file F --text-a-column C [--text-b-column C] "
      "--label-column C), or, for a token classifier, a tagged file (--dev-file F.conll, or "
      "tagged JSONL): seqeval's entity-level precision, recall and F1 and the tag accuracy; for a "
      "sentence embedder, scored pairs (--dev-file F --text-a-column C --text-b-column C "
      "--label-column C): Spearman's and Pearson's correlation of the pairs' cosine similarity "
      "(and Manhattan, Euclidean, dot) with the scores, as sentence-transformers' "
      "EmbeddingSimilarityEvaluator.");
  add_inference_flags(*cmd, o->model);
  add_flags(*cmd,
            select_flags(data_flags(o->data),
                         {"--task", "--data", "--dev-file", "--text-a-column", "--text-b-column",
                          "--label-column", "--no-header", "--skip-malformed", "--format",
                          "--tokens-column", "--tags-column"}));
  add_flags(*cmd, {{"--split", "GLUE split (dev, dev_matched, dev_mismatched, train)", &o->split}});
  cmd->callback([o] { run(*o); });
}

}  // namespace bertfit::cli
