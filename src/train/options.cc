// The training option table and what is derived from it.
#include "train/options.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace bertfit {

std::vector<OptionSpec> data_option_table(DataOptions& d) {
  return {
      {"--task", "GLUE task: mrpc, qqp, sst2, cola, stsb, rte, qnli, mnli, wnli (with --data)",
       &d.task, true},
      {"--data", "The task's GLUE folder (train.tsv, dev.tsv, ...)", &d.data_dir, true},
      {"--train-file", "Custom training file (.tsv, .csv or .jsonl)", &d.train_file, true},
      {"--dev-file", "Custom evaluation file (same columns as --train-file)", &d.dev_file, false},
      {"--text-a-column", "Custom files: first text column (0-based index or header name)",
       &d.text_a_column, true},
      {"--text-b-column", "Custom files: second text column, for sentence pairs", &d.text_b_column,
       true},
      {"--label-column", "Custom files: label column", &d.label_column, true},
      {"--no-header", "Custom files: the first line is data, not a header", &d.no_header, true},
      {"--skip-malformed", "Skip rows with missing columns (and count them) instead of failing",
       &d.skip_malformed, true},
      {"--regression", "Custom files: the label is a number (MSE loss, one output)", &d.regression,
       true},
  };
}

std::vector<OptionSpec> train_option_table(TrainOptions& o) {
  std::vector<OptionSpec> t = {
      {"--model", "Model folder: config.json, model.safetensors, vocab.txt", &o.model_dir, true},
      {"--output", "Output folder: the fine-tuned model, metrics.jsonl, checkpoint/", &o.output_dir,
       false},
      {"--overwrite-output-dir",
       "Replace an --output folder that already holds a model or a run (the new one is written "
       "to OUTPUT.partial and swapped in when it is complete)",
       &o.overwrite_output_dir, false},
  };
  for (auto& s : data_option_table(o.data)) t.push_back(s);
  std::vector<OptionSpec> rest = {
      {"--epochs", "Number of passes over the training data (default 3)", &o.epochs, true},
      {"--batch-size", "Examples per step (per process; default 32)", &o.batch_size, true},
      {"--lr", "Peak learning rate of AdamW (default 2e-5)", &o.lr, true},
      {"--max-seq-len", "Truncate each example to this many tokens (default 128)", &o.max_seq_len,
       true},
      {"--weight-decay", "AdamW weight decay, not on biases and LayerNorm weights (default 0)",
       &o.weight_decay, true},
      {"--warmup-steps", "Linear warmup steps (default 0)", &o.warmup_steps, true},
      {"--warmup-ratio", "Warmup as a fraction of all steps (used when --warmup-steps is 0)",
       &o.warmup_ratio, true},
      {"--max-grad-norm", "Clip gradients to this global L2 norm; 0 disables (default 1)",
       &o.max_grad_norm, true},
      {"--grad-accum", "Micro-batches accumulated per optimizer step (default 1)", &o.grad_accum,
       true},
      {"--seed", "Seed for shuffling and dropout (default 42)", &o.seed, true},
      {"--max-steps", "Stop after this many optimizer steps (overrides --epochs)", &o.max_steps,
       true},
      {"--no-shuffle", "Take examples in file order, epoch after epoch", &o.no_shuffle, true},
      {"--eval-every",
       "Evaluate on the dev split: epoch, every N steps, end (after the last step only) or never",
       &o.eval_every, false},
      {"--save-every", "Write a resumable checkpoint every N steps (0: at each evaluation)",
       &o.save_every, false},
      {"--log-every", "Log loss and learning rate every N steps (default 10)", &o.log_every, false},
      {"--pad-to-multiple-of", "Dynamic padding: round each batch's length up to this (default 8)",
       &o.pad_to_multiple_of, true},
      {"--pad-to-max-length",
       "Pad every training batch to --max-seq-len, as HF run_glue does (for comparisons)",
       &o.pad_to_max_length, true},
      {"--group-by-length",
       "Batch examples of similar length together (less padding): each run of 50 steps' samples "
       "is sorted by length",
       &o.group_by_length, true},
      {"--precision",
       "Matrix products in fp32 or bf16 (bf16 inputs, fp32 accumulation, fp32 master weights)",
       &o.precision, true},
      {"--threads", "Compute threads (default: this process's share of the cores)", &o.threads,
       false},
      {"--no-pin", "Do not pin processes to cores (by default ranks on one host split its cores)",
       &o.no_pin, false},
      {"--comm-timeout", "Seconds a rank waits for the others before failing the job (default 300)",
       &o.comm_timeout, false},
      {"--comm-poll-us",
       "Communication thread polling: 0 adaptive (default), > 0 sleep this many us, < 0 spin",
       &o.comm_poll_us, false},
      {"--grad-comm-dtype",
       "Gradient all-reduce precision on the wire: fp32 or bf16 (half the bytes)",
       &o.grad_comm_dtype, true},
      {"--bucket-mb", "Gradient all-reduce bucket size in MB (default 8)", &o.bucket_mb, false},
      {"--grad-transport",
       "What carries the gradient all-reduce: tcp (a ring of TCP connections between the ranks, "
       "default; falls back to MPI if a rank cannot join) or mpi (MPI_Iallreduce, e.g. for "
       "InfiniBand)",
       &o.grad_transport, false},
      {"--resume", "Resume from a checkpoint folder (OUTPUT/checkpoint)", &o.resume, false},
  };
  for (auto& s : rest) t.push_back(s);
  return t;
}

namespace {

std::string key_of(const std::string& flag) { return flag.substr(2); }

// The same place, however spelled ("m", "./m/", an absolute path, through symlinks).
bool same_path(const std::string& a, const std::string& b) {
  auto norm = [](const std::string& p) {
    std::error_code ec;
    std::filesystem::path n = std::filesystem::weakly_canonical(std::filesystem::absolute(p), ec);
    return n.has_filename() ? n : n.parent_path();  // "m/" -> "m"
  };
  return norm(a) == norm(b);
}

nlohmann::json value_of(const OptionSpec& s) {
  return std::visit([](auto* p) { return nlohmann::json(*p); }, s.target);
}

}  // namespace

nlohmann::json options_to_json(TrainOptions options) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& s : train_option_table(options)) j[key_of(s.flag)] = value_of(s);
  return j;
}

void check_resume_compatible(TrainOptions options, const nlohmann::json& saved) {
  std::string diffs;
  const TrainOptions& o = options;
  for (const auto& s : train_option_table(options)) {
    if (!s.affects_trajectory) continue;
    const std::string key = key_of(s.flag);
    nlohmann::json now = value_of(s);
    if (s.flag == "--model" && saved.contains(key) && saved[key].is_string() &&
        same_path(saved[key].get<std::string>(), o.model_dir)) {
      continue;  // the same folder, spelled another way
    }
    if (!saved.contains(key) || saved[key] != now) {
      diffs += cat(diffs.empty() ? "" : ", ", s.flag, " is ", now.dump(),
                   " but the checkpoint has ", saved.contains(key) ? saved[key].dump() : "nothing");
    }
  }
  if (!diffs.empty()) {
    throw_error("--resume: the run's options differ from the checkpoint's: ", diffs,
                ". Resume with the same options.");
  }
}

void validate_train_options(const TrainOptions& o) {
  if (o.model_dir.empty()) throw_error("--model is required");
  if (o.output_dir.empty()) throw_error("--output is required");
  const DataOptions& d = o.data;
  bool glue = !d.task.empty() || !d.data_dir.empty();
  bool custom = !d.train_file.empty();
  if (glue == custom) {
    throw_error(
        "give either --task with --data, or --train-file with --text-a-column and "
        "--label-column");
  }
  if (glue && (d.task.empty() || d.data_dir.empty())) {
    throw_error("--task and --data go together");
  }
  if (custom && (d.text_a_column.empty() || d.label_column.empty())) {
    throw_error("--train-file needs --text-a-column and --label-column");
  }
  for (auto [flag, value] : {std::pair{"--epochs", o.epochs},
                             {"--lr", o.lr},
                             {"--weight-decay", o.weight_decay},
                             {"--warmup-ratio", o.warmup_ratio},
                             {"--max-grad-norm", o.max_grad_norm},
                             {"--comm-timeout", o.comm_timeout},
                             {"--comm-poll-us", o.comm_poll_us},
                             {"--bucket-mb", o.bucket_mb}}) {
    if (!std::isfinite(value)) throw_error(flag, " must be a finite number, got ", value);
  }
  if (o.epochs <= 0 && o.max_steps <= 0) throw_error("--epochs must be > 0 (or set --max-steps)");
  if (o.batch_size <= 0) throw_error("--batch-size must be > 0, got ", o.batch_size);
  if (o.lr < 0) throw_error("--lr must be >= 0, got ", o.lr);
  if (o.max_seq_len < 2) throw_error("--max-seq-len must be >= 2, got ", o.max_seq_len);
  if (o.grad_accum <= 0) throw_error("--grad-accum must be > 0, got ", o.grad_accum);
  if (o.warmup_steps < 0) throw_error("--warmup-steps must be >= 0");
  if (o.warmup_ratio < 0 || o.warmup_ratio > 1) throw_error("--warmup-ratio must be in [0, 1]");
  if (o.max_grad_norm < 0) throw_error("--max-grad-norm must be >= 0");
  if (o.pad_to_multiple_of <= 0) throw_error("--pad-to-multiple-of must be > 0");
  if (o.log_every <= 0) throw_error("--log-every must be > 0");
  if (o.save_every < 0) throw_error("--save-every must be >= 0");
  if (o.precision != "fp32" && o.precision != "bf16") {
    throw_error("--precision must be fp32 or bf16, got '", o.precision, "'");
  }
  if (o.comm_timeout <= 0) throw_error("--comm-timeout must be > 0");
  if (o.grad_comm_dtype != "fp32" && o.grad_comm_dtype != "bf16") {
    throw_error("--grad-comm-dtype must be fp32 or bf16, got '", o.grad_comm_dtype, "'");
  }
  if (o.bucket_mb <= 0) throw_error("--bucket-mb must be > 0");
  if (o.grad_transport != "tcp" && o.grad_transport != "mpi") {
    throw_error("--grad-transport must be tcp or mpi, got '", o.grad_transport, "'");
  }
  if (o.eval_every != "epoch" && o.eval_every != "never" && o.eval_every != "end") {
    bool digits =
        !o.eval_every.empty() && o.eval_every.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoll(o.eval_every) <= 0) {
      throw_error("--eval-every must be 'epoch', 'end', 'never' or a positive step count, got '",
                  o.eval_every, "'");
    }
  }
}

}  // namespace bertfit
