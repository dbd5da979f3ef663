// Training options: the shared groups (flags/groups.h: model, compute, data) and train's own
// (training, distributed), each flag declared once. train_flags() is the table that drives CLI
// parsing and --help (apps/bertfit), saving into the checkpoint and the resume compatibility
// check, so none of them can drift from the others. Defaults follow HF run_glue / Trainer.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "flags/flag.h"
#include "flags/groups.h"
#include "model/contrastive.h"
#include "model/pooling.h"
#include "train/best_model.h"
#include "train/schedule.h"

namespace bertfit {

// --eval-every: when train evaluates on the dev split.
struct EvalEvery {
  enum class When { kEpoch, kSteps, kEnd, kNever };
  When when = When::kEpoch;
  std::int64_t steps = 0;  // kSteps: every this many optimizer steps (> 0)

  bool operator==(const EvalEvery&) const = default;
};

// "epoch", "end", "never" or a positive step count (digits only); nullopt for anything else.
std::optional<EvalEvery> parse_eval_every(const std::string& word);
// The word parse_eval_every reads back ("epoch", ..., or the step count).
std::string eval_every_name(const EvalEvery& e);

// --class-weights: the weights of single-label cross-entropy's classes, as
// torch.nn.CrossEntropyLoss(weight=...): none, balanced (sklearn's compute_class_weight from the
// training labels, decided when the run starts) or one given weight per label.
struct ClassWeights {
  enum class Kind { kNone, kBalanced, kGiven };
  Kind kind = Kind::kNone;
  std::vector<double> given;  // kGiven: finite and > 0, one per label (checked at set-up)

  bool operator==(const ClassWeights&) const = default;
};

// "none", "balanced" or comma-separated finite positive numbers; nullopt for anything else.
std::optional<ClassWeights> parse_class_weights(const std::string& word);
// The word parse_class_weights reads back (numbers in their shortest exact form).
std::string class_weights_name(const ClassWeights& w);

// Data-parallel runs (mpirun -np N): see comm/.
struct DistributedOptions {
  double comm_timeout = 300;
  double comm_poll_us = 0;  // comm thread pacing: 0 adaptive, > 0 fixed sleep, < 0 spin
  WireDType grad_comm_dtype = WireDType::kF32;
  double bucket_mb = 8;  // 4-12 MB exposed the least wait (comm/grad_reducer.h)
  bool no_pin = false;
};

// What train fits (--objective): a classifier (a label per text or per word) or a sentence-
// embedding model (contrastive, on rows of texts); auto: an embedding model when --model is a
// sentence-transformers folder (modules.json), a classifier otherwise.
enum class Objective { kAuto, kClassification, kEmbedding };

// Sentence-embedding training (train/embedding_data.h).
struct EmbeddingTrainOptions {
  Objective objective = Objective::kAuto;
  std::optional<PairLoss> loss;  // unset: mnrl, or cosent when --label-column gives scores
  double loss_scale = 20;        // MNRL's and CoSENT's scale of the cosine similarities
  std::vector<std::string> negative_columns;  // MNRL's hard negatives, one column each
  std::optional<Pooling> pooling;             // a plain encoder's pooling (unset: mean)

  bool operator==(const EmbeddingTrainOptions&) const = default;
};

// Where the curves go besides metrics.jsonl (Trainer's --report_to).
enum class ReportTo { kNone, kTensorBoard };

struct TrainOptions {
  std::string model_dir;          // model group: --model as given (saved, compared on resume)
  std::string revision = "main";  // model group: --revision of a Hub repository id
  // Not a flag: the folder --model was found in (a repository id's snapshot folder in the Hub
  // cache), set by the command before the run; empty: model_dir is the folder.
  std::string resolved_model;
  ComputeOptions compute;           // compute group
  DataOptions data;                 // data group
  HeadOptions head;                 // head group: labels and problem type of the head
  EmbeddingTrainOptions embedding;  // the embedding group
  // The training group.
  std::string output_dir;
  bool overwrite_output_dir = false;  // replace an --output that holds a model or a run
  double epochs = 3.0;
  double lr = 2e-5;
  double weight_decay = 0.0;
  std::int64_t warmup_steps = 0;
  double warmup_ratio = 0.0;
  LrSchedule lr_scheduler_type = LrSchedule::kLinear;
  double label_smoothing = 0.0;  // --label-smoothing-factor (single-label classification)
  ClassWeights class_weights;
  double max_grad_norm = 1.0;
  int grad_accum = 1;
  std::int64_t seed = 42;
  std::int64_t max_steps = 0;  // > 0 overrides epochs
  bool no_shuffle = false;
  EvalEvery eval_every;
  std::int64_t save_every = 0;  // checkpoint every N steps; 0: at each evaluation
  std::int64_t log_every = 10;
  ReportTo report_to = ReportTo::kNone;  // tensorboard: event files in OUTPUT/runs
  int pad_to_multiple_of = 8;
  bool pad_to_max_length = false;  // pad every training batch to max_seq_len (HF run_glue's way)
  bool group_by_length = false;    // batches of similar lengths (see SampleStream)
  std::string resume;
  // The best checkpoint and early stopping (best_model.h). The best evaluation is tracked and
  // reported always; load_best_model_at_end makes the saved model the best one.
  bool load_best_model_at_end = false;
  BestModelOptions best;
  std::int64_t save_total_limit = 1;  // checkpoints kept: the newest in checkpoint/; 0: all
  DistributedOptions dist;            // distributed group

  // Not a flag: whether --max-seq-len was given (the command sets it). When not, a
  // sentence-transformers folder's max_seq_length applies to embedding training, as in fit().
  bool max_seq_len_given = true;

  // Where the model's files are: resolved_model, else model_dir.
  const std::string& model_folder() const {
    return resolved_model.empty() ? model_dir : resolved_model;
  }
};

// The training group's flags (--output, --epochs, --lr, ...), the embedding group's
// (--objective, --loss, ...) and the distributed group's.
FlagTable training_flags(TrainOptions& options);
FlagTable embedding_train_flags(EmbeddingTrainOptions& embedding);
FlagTable distributed_flags(DistributedOptions& dist);
// Every flag of `bertfit train`: model, compute, data, head, training, embedding and
// distributed groups.
FlagTable train_flags(TrainOptions& options);

// All options as a JSON object (flag names without dashes as keys; a choice flag's word).
nlohmann::json options_to_json(TrainOptions options);
// Error naming every trajectory-affecting option whose value differs from `saved`. An option
// `saved` lacks is newer than the run that wrote it, which therefore ran with its default.
// --batch-size, --grad-accum, --max-steps and --epochs are left to the resume (run_setup.cc):
// the global batch must stay, the run's length may grow.
void check_resume_compatible(TrainOptions options, const nlohmann::json& saved);

// Validates values a user can get wrong (positive sizes, exactly one data source, ...).
void validate_train_options(const TrainOptions& options);

}  // namespace bertfit
