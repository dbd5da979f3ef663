// The shared flag groups (see groups.h).
#include "flags/groups.h"

namespace bertfit {

FlagTable model_flags(std::string& model_dir, std::string& revision) {
  return {
      {"--model",
       "Model: a folder in Hugging Face layout (config.json; model.safetensors, pytorch_model.bin "
       "or either sharded behind its index; vocab.txt or tokenizer.json), or a Hugging Face Hub "
       "repository id (org/name) that is not a folder here, downloaded into the Hugging Face "
       "cache",
       &model_dir, true},
      {"--revision", "Hub branch, tag or commit of a repository id given as the model", &revision,
       true},
  };
}

FlagTable compute_flags(ComputeOptions& c) {
  return {
      {"--precision",
       "Matrix products in fp32, bf16 (bf16 inputs, fp32 accumulation, fp32 master weights) or "
       "int8 (inference only: int8 weights and inputs on VNNI, fp32 elsewhere)",
       choice_target(
           c.precision,
           {{"fp32", Precision::kF32}, {"bf16", Precision::kBF16}, {"int8", Precision::kInt8}}),
       true},
      {"--threads", "Compute threads; 0: this process's share of the cores", &c.threads, false},
      {"--batch-size",
       "Examples per forward pass, per process (a training step takes --grad-accum of them on "
       "every rank)",
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
      {"--dev-file", "Custom evaluation file (.tsv, .csv or .jsonl; the training file's columns)",
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
       "Skip malformed rows (missing fields, invalid UTF-8 or JSON, broken CSV quoting) and count "
       "them, instead of failing at the first",
       &d.skip_malformed, true},
      {"--regression", "Custom files: the label is a number (MSE loss, one output)", &d.regression,
       true},
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

}  // namespace bertfit
