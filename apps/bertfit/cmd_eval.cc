// `bertfit eval`: the task's metrics of a model on a GLUE split or a custom labelled file.
#include <CLI/CLI.hpp>
#include <algorithm>
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
#include "task/retrieval_data.h"
#include "task/tagged_data.h"
#include "tokenizer/tokenizer.h"

namespace bertfit::cli {
namespace {

struct EvalOptions {
  InferenceOptions model;
  DataOptions data;
  std::string split = "dev";
  bool max_seq_len_given = false;
};

void run(const EvalOptions& o) {
  const bool retrieval = wants_retrieval(o.data);
  if (retrieval && !o.data.dev_file.empty()) {
    throw_error(
        "--queries and --dev-file: give one evaluation set, a retrieval set (--queries, "
        "--corpus, --qrels) or a file of examples");
  }
  if (retrieval && !o.data.task.empty()) {
    throw_error("--queries and --task: give one evaluation set, a retrieval set or a GLUE task");
  }
  if (!retrieval && o.data.task.empty() == o.data.dev_file.empty()) {
    throw_error(
        "give either --task with --data, or --dev-file with its columns (or, for a "
        "sentence embedder, --queries, --corpus and --qrels)");
  }
  if (!o.data.task.empty() && o.data.data_dir.empty()) throw_error("--task needs --data");
  InferenceModel m = load_for_inference(o.model);
  const ModelState& state = m.state;
  // A sentence embedder cuts its texts at the folder's max_seq_length unless --max-seq-len says
  // otherwise, as sentence-transformers' encode (so its evaluators) and `bertfit embed` do.
  int max_seq_len = o.model.compute.max_seq_len;
  if (state.config.head == HeadKind::kEmbedding && !o.max_seq_len_given &&
      state.sentence_transformer && state.sentence_transformer->max_seq_length) {
    max_seq_len = std::min(*state.sentence_transformer->max_seq_length, state.config.max_tokens());
  }
  const bool tagged = !o.data.dev_file.empty() && is_tagged_data(o.data, o.data.dev_file);
  std::vector<EncodedExample> encoded;
  TaskInfo task;
  nlohmann::json sizes = nlohmann::json::object();
  if (retrieval && state.config.head != HeadKind::kEmbedding) {
    throw_error("--queries: ", o.model.model_dir, " is a ", head_kind_name(state.config.head),
                " model; the retrieval evaluation is for sentence embedders");
  }
  if (retrieval) {
    // A sentence embedder: how its cosine similarities rank each query's documents.
    RetrievalSet set = load_retrieval_set(o.data);
    encoded = encode_retrieval_set(*m.tokenizer, set, max_seq_len);
    sizes = {{"queries", set.judgements->queries},
             {"queries_dropped", set.dropped_queries},
             {"corpus", set.judgements->corpus}};
    task = retrieval_task_info(set.judgements);
  } else if (state.config.head == HeadKind::kEmbedding) {
    // A sentence embedder: how its cosine similarities rank scored pairs.
    if (o.data.dev_file.empty()) {
      throw_error(o.model.model_dir, " is a sentence embedder: give --dev-file with scored pairs ",
                  "(--text-a-column, --text-b-column, --label-column), or a retrieval set ",
                  "(--queries, --corpus, --qrels)");
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
  j.update(sizes);
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
      "EmbeddingSimilarityEvaluator; or a retrieval set (--queries Q.jsonl --corpus C.jsonl "
      "--qrels QRELS.tsv, as BEIR lays them out): each query's documents ranked by cosine "
      "similarity (and dot product), eval_cosine_ndcg@10, _mrr@10, _map@100, _accuracy@k, "
      "_precision@k, _recall@k (k 1, 3, 5, 10) and the same for dot_, as sentence-transformers' "
      "InformationRetrievalEvaluator. A sentence embedder's texts are cut at the folder's "
      "max_seq_length unless --max-seq-len.");
  add_inference_flags(*cmd, o->model);
  add_flags(*cmd,
            select_flags(data_flags(o->data),
                         {"--task", "--data", "--dev-file", "--text-a-column", "--text-b-column",
                          "--label-column", "--no-header", "--skip-malformed", "--format",
                          "--tokens-column", "--tags-column", "--queries", "--corpus", "--qrels"}));
  add_flags(*cmd, {{"--split", "GLUE split (dev, dev_matched, dev_mismatched, train)", &o->split}});
  cmd->callback([o, cmd] {
    o->max_seq_len_given = cmd->get_option("--max-seq-len")->count() > 0;
    run(*o);
  });
}

}  // namespace bertfit::cli
