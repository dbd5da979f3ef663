// The shared flag groups (see groups.h).
#include "flags/groups.h"

namespace bertfit {

FlagTable model_flags(std::string& model_dir, std::string& revision) {
  return {
      {"--model",
       "Model: a folder in Hugging Face layout (config.json; model.safetensors, pytorch_model.bin "
       "or either sharded behind its index; the tokenizer's files), or a Hugging Face Hub "
       "repository id (org/name) that is not a folder here, downloaded into the Hugging Face "
       "cache",
       &model_dir, true},
      {"--revision", "Hub branch, tag or commit of a repository id given as the model", &revision,
       true},
  };
}

FlagTable compute_flags(ComputeOptions& c, ComputeUse use) {
  const bool train = use == ComputeUse::kTrain;
  std::vector<Choice<Precision>> precisions = {{"fp32", Precision::kF32},
                                               {"bf16", Precision::kBF16}};
  if (!train) precisions.push_back({"int8", Precision::kInt8});
  ParsedTarget precision = choice_target(c.precision, precisions);
  if (train) precision.accepted += " (int8 is for inference: eval, predict, serve)";
  return {
      {"--precision",
       train ? "Matrix products in fp32 or bf16 (bf16 inputs, fp32 accumulation, fp32 master "
               "weights)"
             : "Matrix products in fp32, bf16 (bf16 inputs, fp32 accumulation) or int8 (int8 "
               "weights and inputs on VNNI, fp32 elsewhere)",
       precision, true},
      {"--threads", "Compute threads; 0: this process's share of the cores", &c.threads, false},
      {"--batch-size",
       train ? "Examples per forward pass, per process (a training step takes --grad-accum of "
               "them on every rank)"
             : "Examples per forward pass",
       &c.batch_size, true},
      {"--max-seq-len", "Truncate each example to this many tokens", &c.max_seq_len, true},
  };
}

FlagTable data_flags(DataOptions& d) {
  return {
      {"--task", "GLUE task: mrpc, qqp, sst2, cola, stsb, rte, qnli, mnli, wnli (with --data)",
       &d.task, true},
      {"--data", "The task's GLUE folder (train.tsv, dev.tsv, ...)", &d.data_dir, true},
      {"--train-file", "Custom training file (.tsv, .csv or .jsonl)", &d.train_file, true},
      {"--dev-file",
       "Custom evaluation file (.tsv, .csv or .jsonl; the columns named by --text-a-column, "
       "--text-b-column and --label-column)",
       &d.dev_file, false},
      {"--text-a-column",
       "Column of the first text: a header name, a 0-based index (all digits), or a JSONL key",
       &d.text_a_column, true},
      {"--text-b-column",
       "Column of the second text of a pair (same forms as --text-a-column); omit for single texts",
       &d.text_b_column, true},
      {"--label-column", "Label column (same forms as --text-a-column)", &d.label_column, true},
      {"--no-header", "TSV/CSV: the first line is data, not a header (columns are then indices)",
       &d.no_header, true},
      {"--skip-malformed",
       "Skip malformed rows (missing fields, invalid UTF-8 or JSON, broken CSV quoting; tagged "
       "words: a whole sentence with such a line or a word without its tag) and count them, "
       "instead of failing at the first",
       &d.skip_malformed, true},
      {"--regression", "Custom files: the label is a number (MSE loss, one output)", &d.regression,
       true},
      {"--format",
       "Format of the data files (tsv: split on TAB only; csv: RFC 4180 quoting; jsonl: one "
       "object per line; conll: a word and its tag per line, a blank line between sentences, "
       "for token classification); default: from each file's extension (.conll is conll). "
       "Needed for '-' (standard input)",
       choice_target(d.format, {{"tsv", std::optional(TableFormat::kTsv)},
                                {"csv", std::optional(TableFormat::kCsv)},
                                {"jsonl", std::optional(TableFormat::kJsonl)},
                                {"conll", std::optional(TableFormat::kConll)}}),
       true},
      {"--tokens-column",
       "Tagged JSONL (token classification): the key of each line's list of words (default "
       "tokens)",
       &d.tokens_column, true},
      {"--tags-column",
       "Tagged JSONL (token classification): the key of each line's list of tags, one per word: "
       "names, or integer ids of the model's id2label (default tags)",
       &d.tags_column, true},
      {"--queries",
       "Sentence embedders: retrieval evaluation (with --corpus and --qrels; in place of "
       "--dev-file), the queries as BEIR's queries.jsonl: one {\"_id\", \"text\"} per line",
       &d.queries_file, false},
      {"--corpus",
       "Retrieval evaluation: the documents as BEIR's corpus.jsonl, one {\"_id\", \"text\"} per "
       "line (a \"title\" is not embedded: write it into \"text\")",
       &d.corpus_file, false},
      {"--qrels",
       "Retrieval evaluation: the judgements as BEIR's qrels TSV, a header line then query-id, "
       "corpus-id, score per line (score > 0: relevant); queries without a relevant document are "
       "left out, as sentence-transformers' InformationRetrievalEvaluator does",
       &d.qrels_file, false},
  };
}

FlagTable head_flags(HeadOptions& h) {
  return {
      {"--num-labels",
       "Outputs of the classification head (1: regression); 0: from the task or the data",
       &h.num_labels, true},
      {"--labels",
       "Class names in id order, comma-separated (NAME,NAME,...): the head's labels; default: the "
       "model's names when the data's are among them, else the data's sorted",
       &h.labels, true},
      {"--problem-type",
       "regression, single_label_classification or multi_label_classification; auto: from the "
       "task, the data or the model",
       choice_target(h.problem_type,
                     {{"auto", std::optional<ProblemType>()},
                      {"regression", std::optional(ProblemType::kRegression)},
                      {"single_label_classification", std::optional(ProblemType::kSingleLabel)},
                      {"multi_label_classification", std::optional(ProblemType::kMultiLabel)}}),
       true},
      {"--ignore-mismatched-sizes",
       "Start a new classification head when the model's has another number of outputs (the "
       "encoder's weights are kept)",
       &h.ignore_mismatched_sizes, true},
  };
}

FlagTable overwrite_flags(bool& overwrite) {
  return {
      {"--overwrite-output-dir",
       "Replace an --output folder that already holds a model or a run, as a whole (the new one "
       "is written to OUTPUT.partial and swapped in when it is complete)",
       &overwrite, false},
  };
}

FlagTable pooling_flags(std::optional<Pooling>& pooling) {
  return {{"--pooling",
           "Use the model as a sentence embedder with this pooling (TEI's --pooling): a plain "
           "encoder's token vectors become the sentence's by cls, mean, max, mean_sqrt_len or "
           "last_token; a sentence-transformers folder's own Pooling module is overridden",
           choice_target(pooling, {{"cls", std::optional(Pooling::kCls)},
                                   {"mean", std::optional(Pooling::kMean)},
                                   {"max", std::optional(Pooling::kMax)},
                                   {"mean_sqrt_len", std::optional(Pooling::kMeanSqrtLen)},
                                   {"last_token", std::optional(Pooling::kLastToken)}}),
           false}};
}

FlagTable tuned_config_flags(std::string& path) {
  return {
      {"--config",
       "A tuned.json written by `bertfit tune`: its settings (threads, precision, batch sizes; "
       "OpenMP's wait policy and binding, the allocator) apply where this command line gives "
       "no value of its own",
       &path, false},
  };
}

}  // namespace bertfit
