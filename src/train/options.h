// Training options, declared once: the table from train_option_table() drives CLI parsing and
// --help (apps/bertfit), printing, saving into the checkpoint, and the resume compatibility
// check, so none of them can drift from the others. Defaults follow HF run_glue / Trainer.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <variant>
#include <vector>

namespace bertfit {

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
  bool regression = false;  // custom files: the label column holds numbers
};

struct TrainOptions {
  std::string model_dir;
  std::string output_dir;
  bool overwrite_output_dir = false;  // replace an --output that holds a model or a run
  DataOptions data;
  double epochs = 3.0;
  int batch_size = 32;
  double lr = 2e-5;
  int max_seq_len = 128;
  double weight_decay = 0.0;
  std::int64_t warmup_steps = 0;
  double warmup_ratio = 0.0;
  double max_grad_norm = 1.0;
  int grad_accum = 1;
  std::int64_t seed = 42;
  std::int64_t max_steps = 0;  // > 0 overrides epochs
  bool no_shuffle = false;
  std::string eval_every = "epoch";  // epoch | N (steps) | never
  std::int64_t save_every = 0;       // checkpoint every N steps; 0: at each evaluation
  std::int64_t log_every = 10;
  int pad_to_multiple_of = 8;
  bool pad_to_max_length = false;  // pad every training batch to max_seq_len (HF run_glue's way)
  bool group_by_length = false;    // batches of similar lengths (see SampleStream)
  std::string precision = "fp32";  // fp32 | bf16 matrix products
  int threads = 0;                 // 0: this rank's share of the cores
  bool no_pin = false;
  std::string resume;
  // Data-parallel runs (mpirun -np N): see comm/.
  double comm_timeout = 300;
  double comm_poll_us = 0;  // comm thread pacing: 0 adaptive, > 0 fixed sleep, < 0 spin
  std::string grad_comm_dtype = "fp32";  // fp32 | bf16 on the wire
  double bucket_mb = 8;                  // 4-12 MB exposed the least wait (comm/grad_reducer.h)
  std::string grad_transport = "tcp";    // tcp (ring of sockets) | mpi, see comm/tcp_ring.h
};

// One option as the CLI shows it.
struct OptionSpec {
  std::string flag;  // "--lr"
  std::string help;
  std::variant<bool*, int*, std::int64_t*, double*, std::string*> target;
  bool affects_trajectory;  // must match when resuming
};

std::vector<OptionSpec> train_option_table(TrainOptions& options);
// The data-source flags shared by train, eval and predict.
std::vector<OptionSpec> data_option_table(DataOptions& data);

// All options as a JSON object (flag names without dashes as keys).
nlohmann::json options_to_json(TrainOptions options);
// Error naming every trajectory-affecting option whose value differs from `saved`.
void check_resume_compatible(TrainOptions options, const nlohmann::json& saved);

// Validates values a user can get wrong (positive sizes, exactly one data source, ...).
void validate_train_options(const TrainOptions& options);

}  // namespace bertfit
