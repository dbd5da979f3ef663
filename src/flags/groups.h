// The flags several commands share, each declared once (one help text, one default): the model
// (a folder or a Hub name, and its revision), how to compute, where labelled examples come from,
// and replacing an output folder. A command adds the groups, or the entries of a group, it needs
// (flags/flag.h: select_flags); train saves them with its own (train/options.h), so an entry marked
// affects_trajectory must match when a run resumes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "data/table.h"
#include "flags/flag.h"
#include "model/config.h"
#include "model/pooling.h"
#include "model/precision.h"

namespace bertfit {

// --model: a Hugging Face model folder or a Hub repository id (required or not: the command
// says), and --revision: the Hub branch, tag or commit of a repository id. flags/ knows nothing of
// the Hub: the command resolves a repository id to its folder (apps/bertfit/model_source.h).
FlagTable model_flags(std::string& model_dir, std::string& revision);

// How the model computes: --precision, --threads, --batch-size, --max-seq-len.
struct ComputeOptions {
  Precision precision = Precision::kF32;  // as asked; runnable_precision() is what runs
  int threads = 0;                        // 0: this process's share of the cores
  int batch_size = 32;                    // examples per forward pass, per process
  int max_seq_len = 128;                  // tokens per example after truncation
};

// Who computes: the help says only what applies to it (training: fp32 or bf16 with fp32 master
// weights, a step of --grad-accum batches; inference: fp32, bf16 or int8, one batch at a time).
enum class ComputeUse { kInference, kTrain };

FlagTable compute_flags(ComputeOptions& compute, ComputeUse use = ComputeUse::kInference);

// Where the examples come from: a GLUE task folder, or custom files with named columns.
struct DataOptions {
  std::string task;        // mrpc, sst2, ... (with data_dir)
  std::string data_dir;    // the task's GLUE folder (train.tsv, dev.tsv, ...)
  std::string train_file;  // custom TSV/CSV/JSONL
  std::string dev_file;
  std::string text_a_column;
  std::string text_b_column;
  std::string label_column;
  bool no_header = false;
  bool skip_malformed = false;
  bool regression = false;            // custom files: the label column holds numbers
  std::optional<TableFormat> format;  // custom files and --input: unset, from the extension
  // Tagged JSONL (token classification): the keys of the words and of their tags ("": the
  // defaults "tokens" and "tags"; either given says the data is tagged).
  std::string tokens_column, tags_column;
  // A sentence embedder's retrieval evaluation (task/retrieval_data.h): BEIR's queries.jsonl,
  // corpus.jsonl and a qrels TSV.
  std::string queries_file, corpus_file, qrels_file;
};

FlagTable data_flags(DataOptions& data);

// What the classification head is for (train): set, they override what the task, the data and
// the model would decide (task/dataset.h: decide_train_task).
struct HeadOptions {
  int num_labels = 0;                       // 0: from the task or the data
  std::vector<std::string> labels;          // class names in id order (empty: decided)
  std::optional<ProblemType> problem_type;  // nullopt: from the task, the data or the model
  bool ignore_mismatched_sizes = false;     // a head of another size is started anew
};

FlagTable head_flags(HeadOptions& head);

// --pooling (embed, serve): run the model as a sentence embedder with this pooling, TEI's
// --pooling (model_io.h: LoadOptions::pooling). Unset: the folder's modules decide.
FlagTable pooling_flags(std::optional<Pooling>& pooling);

// --overwrite-output-dir (train, init): see train/output_dir.h.
FlagTable overwrite_flags(bool& overwrite_output_dir);

// --config tuned.json (serve, predict, bench, train, eval, embed): the settings `bertfit tune`
// found. The command never reads `path`: main applies the file before parsing
// (apps/bertfit/tuned_config.h), which finds the commands that take it by this flag's help.
FlagTable tuned_config_flags(std::string& path);

}  // namespace bertfit
