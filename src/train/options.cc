// The training flags (training and distributed groups) and what is derived from every flag of
// train: the saved options and the resume check.
#include "train/options.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "task/retrieval_data.h"
#include "task/tagged_data.h"
#include "train/embedding_data.h"

namespace bertfit {

namespace {

ParsedTarget eval_every_target(EvalEvery& field) {
  ParsedTarget t;
  t.label = "{epoch,end,never,N}";
  t.accepted = "epoch, end, never or a positive step count N";
  t.get = [&field] { return eval_every_name(field); };
  t.set = [&field](const std::string& word) {
    std::optional<EvalEvery> e = parse_eval_every(word);
    if (e) field = *e;
    return e.has_value();
  };
  return t;
}

// --greater-is-better: true or false (Trainer's spelling True / False too), auto: by the metric.
ParsedTarget greater_target(std::optional<bool>& field) {
  ParsedTarget t;
  t.label = "{auto,true,false}";
  t.accepted = "auto, true or false";
  t.get = [&field] { return field ? (*field ? "true" : "false") : "auto"; };
  t.set = [&field](const std::string& word) {
    if (word == "auto") {
      field.reset();
    } else if (word == "true" || word == "True") {
      field = true;
    } else if (word == "false" || word == "False") {
      field = false;
    } else {
      return false;
    }
    return true;
  };
  return t;
}

ParsedTarget class_weights_target(ClassWeights& field) {
  ParsedTarget t;
  t.label = "{none,balanced,W1,W2,...}";
  t.accepted = "none, balanced or one finite positive weight per label, comma-separated";
  t.get = [&field] { return class_weights_name(field); };
  t.set = [&field](const std::string& word) {
    std::optional<ClassWeights> w = parse_class_weights(word);
    if (w) field = *w;
    return w.has_value();
  };
  return t;
}

}  // namespace

std::optional<ClassWeights> parse_class_weights(const std::string& word) {
  using Kind = ClassWeights::Kind;
  if (word == "none") return ClassWeights{};
  if (word == "balanced") return ClassWeights{Kind::kBalanced, {}};
  ClassWeights w{Kind::kGiven, {}};
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = std::min(word.find(',', begin), word.size());
    double value = 0;
    const char* first = word.data() + begin;
    const char* last = word.data() + end;
    auto [ptr, ec] = std::from_chars(first, last, value);
    if (first == last || ec != std::errc() || ptr != last || !std::isfinite(value) || value <= 0) {
      return std::nullopt;
    }
    w.given.push_back(value);
    if (end == word.size()) break;
    begin = end + 1;
  }
  return w;
}

std::string class_weights_name(const ClassWeights& w) {
  switch (w.kind) {
    case ClassWeights::Kind::kNone:
      return "none";
    case ClassWeights::Kind::kBalanced:
      return "balanced";
    case ClassWeights::Kind::kGiven:
      break;
  }
  std::string out;
  for (double v : w.given) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest exact form
    if (!out.empty()) out += ',';
    out.append(buf, end);
  }
  return out;
}

std::optional<EvalEvery> parse_eval_every(const std::string& word) {
  using When = EvalEvery::When;
  if (word == "epoch") return EvalEvery{When::kEpoch};
  if (word == "end") return EvalEvery{When::kEnd};
  if (word == "never") return EvalEvery{When::kNever};
  if (word.empty() || word.size() > 18 || word.find_first_not_of("0123456789") != word.npos) {
    return std::nullopt;  // 18 digits: no overflow
  }
  const std::int64_t steps = std::stoll(word);
  if (steps <= 0) return std::nullopt;
  return EvalEvery{When::kSteps, steps};
}

std::string eval_every_name(const EvalEvery& e) {
  switch (e.when) {
    case EvalEvery::When::kEpoch:
      return "epoch";
    case EvalEvery::When::kEnd:
      return "end";
    case EvalEvery::When::kNever:
      return "never";
    case EvalEvery::When::kSteps:
      break;
  }
  return std::to_string(e.steps);
}

FlagTable training_flags(TrainOptions& o) {
  FlagTable output = {
      {"--output", "Output folder: the fine-tuned model, metrics.jsonl, checkpoint/", &o.output_dir,
       false},
  };
  FlagTable run = {
      {"--epochs", "Number of passes over the training data", &o.epochs, true},
      {"--lr", "Peak learning rate of AdamW", &o.lr, true},
      {"--weight-decay", "AdamW weight decay, not on biases and LayerNorm weights", &o.weight_decay,
       true},
      {"--warmup-steps", "Linear warmup steps", &o.warmup_steps, true},
      {"--warmup-ratio", "Warmup as a fraction of all steps (used when --warmup-steps is 0)",
       &o.warmup_ratio, true},
      {"--lr-scheduler-type",
       "Learning-rate schedule after the warmup, as Trainer's lr_scheduler_type (constant "
       "ignores the warmup; polynomial decays to 1e-7)",
       choice_target(o.lr_scheduler_type, lr_schedule_choices()), true},
      {"--label-smoothing-factor",
       "Label smoothing of single-label classification, as Trainer's LabelSmoother (0: off)",
       &o.label_smoothing, true},
      {"--class-weights",
       "Weighted cross-entropy of single-label classification: balanced (n / (K · count of the "
       "class) over the training data) or K comma-separated weights, in label order",
       class_weights_target(o.class_weights), true},
      {"--max-grad-norm", "Clip gradients to this global L2 norm; 0 disables", &o.max_grad_norm,
       true},
      {"--grad-accum", "Micro-batches accumulated per optimizer step", &o.grad_accum, true},
      {"--seed", "Seed for shuffling and dropout", &o.seed, true},
      {"--max-steps", "Stop after this many optimizer steps (overrides --epochs; 0: off)",
       &o.max_steps, true},
      {"--no-shuffle", "Take examples in file order, epoch after epoch", &o.no_shuffle, true},
      {"--eval-every",
       "Evaluate on the dev split: every epoch, every N steps, at the end (after the last step "
       "only) or never",
       eval_every_target(o.eval_every), false},
      {"--save-every", "Write a resumable checkpoint every N steps (0: at each evaluation)",
       &o.save_every, false},
      {"--log-every", "Log loss and learning rate every N steps", &o.log_every, false},
      {"--report-to",
       "Also write every logged value for: none, or tensorboard (event files in OUTPUT/runs, "
       "with Trainer's tag names); `bertfit report OUTPUT` draws them as an HTML page either way",
       choice_target(o.report_to,
                     {{"none", ReportTo::kNone}, {"tensorboard", ReportTo::kTensorBoard}}),
       false},
      {"--pad-to-multiple-of", "Dynamic padding: round each batch's length up to this",
       &o.pad_to_multiple_of, true},
      {"--pad-to-max-length",
       "Pad every training batch to --max-seq-len, as HF run_glue does (for comparisons)",
       &o.pad_to_max_length, true},
      {"--group-by-length",
       "Batch examples of similar length together (less padding): each run of 50 steps' samples "
       "is sorted by length",
       &o.group_by_length, true},
      {"--resume", "Resume from a checkpoint folder (OUTPUT/checkpoint)", &o.resume, false},
      {"--save-total-limit",
       "Checkpoints kept: the newest in OUTPUT/checkpoint, older ones as OUTPUT/checkpoint-STEP "
       "(0: all)",
       &o.save_total_limit, false},
  };
  FlagTable best = {
      {"--load-best-model-at-end",
       "Save the model of the best evaluation (kept in OUTPUT/best while training) instead of "
       "the last one",
       &o.load_best_model_at_end, true},
      {"--metric-for-best-model",
       "What makes an evaluation the best: loss or a metric the task reports "
       "(accuracy, f1, pearson, f1_macro, ...), on the first dev split",
       &o.best.metric, true},
      {"--greater-is-better",
       "Whether a higher --metric-for-best-model is better (auto: no for the loss, yes otherwise)",
       greater_target(o.best.greater_is_better), true},
      {"--early-stopping-patience",
       "Stop after this many evaluations in a row without improvement (needs "
       "--load-best-model-at-end; 0: off)",
       &o.best.patience, true},
      {"--early-stopping-threshold",
       "How much better than the best an evaluation must be to count as an improvement",
       &o.best.threshold, true},
  };
  return join_flags({output, overwrite_flags(o.overwrite_output_dir), run, best});
}

FlagTable embedding_train_flags(EmbeddingTrainOptions& e) {
  return {
      {"--objective",
       "What to train: classification (labels per text or per word), embedding (sentence "
       "embeddings from rows of texts, contrastive), or auto: embedding for a "
       "sentence-transformers folder (modules.json), classification otherwise",
       choice_target(e.objective, {{"auto", Objective::kAuto},
                                   {"classification", Objective::kClassification},
                                   {"embedding", Objective::kEmbedding}}),
       true},
      {"--loss",
       "Embedding training's loss: mnrl (MultipleNegativesRankingLoss: each anchor "
       "(--text-a-column) against every positive (--text-b-column) and hard negative of the "
       "batch), cosent (CoSENTLoss) or cosine (CosineSimilarityLoss) on pairs scored by "
       "--label-column; auto: cosent when --label-column is given, mnrl otherwise",
       choice_target(e.loss, {{"auto", std::optional<PairLoss>()},
                              {"mnrl", std::optional(PairLoss::kMultipleNegativesRanking)},
                              {"cosent", std::optional(PairLoss::kCoSENT)},
                              {"cosine", std::optional(PairLoss::kCosineSimilarity)}}),
       true},
      {"--loss-scale", "The scale of the cosine similarities in mnrl and cosent", &e.loss_scale,
       true},
      {"--negative-columns",
       "mnrl's hard negatives: columns of the training file (comma-separated), each one more "
       "candidate per row",
       &e.negative_columns, true},
      {"--pooling",
       "Embedding training of a plain encoder (not a sentence-transformers folder): how token "
       "vectors become the sentence's (cls, mean, max, mean_sqrt_len, last_token; auto: mean, "
       "as sentence-transformers wraps a plain model); the output is a sentence-transformers "
       "folder",
       choice_target(e.pooling, {{"auto", std::optional<Pooling>()},
                                 {"cls", std::optional(Pooling::kCls)},
                                 {"mean", std::optional(Pooling::kMean)},
                                 {"max", std::optional(Pooling::kMax)},
                                 {"mean_sqrt_len", std::optional(Pooling::kMeanSqrtLen)},
                                 {"last_token", std::optional(Pooling::kLastToken)}}),
       true},
  };
}

FlagTable distributed_flags(DistributedOptions& d) {
  return {
      {"--comm-timeout", "Seconds a rank waits for the others before failing the job",
       &d.comm_timeout, false},
      {"--comm-poll-us",
       "Communication thread polling: 0 adaptive, > 0 sleep this many us, < 0 spin",
       &d.comm_poll_us, false},
      {"--grad-comm-dtype", "Gradient all-reduce precision on the wire (bf16: half the bytes)",
       choice_target(d.grad_comm_dtype, {{"fp32", WireDType::kF32}, {"bf16", WireDType::kBF16}}),
       true},
      {"--bucket-mb", "Gradient all-reduce bucket size in MB", &d.bucket_mb, false},
      {"--no-pin", "Do not pin processes to cores (by default ranks on one host split its cores)",
       &d.no_pin, false},
  };
}

FlagTable train_flags(TrainOptions& o) {
  return join_flags({model_flags(o.model_dir, o.revision),
                     compute_flags(o.compute, ComputeUse::kTrain), data_flags(o.data),
                     head_flags(o.head), training_flags(o), embedding_train_flags(o.embedding),
                     distributed_flags(o.dist)});
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

nlohmann::json value_of(const Flag& f) {
  return std::visit(
      [](const auto& target) {
        if constexpr (std::is_same_v<std::decay_t<decltype(target)>, ParsedTarget>) {
          return nlohmann::json(target.get());
        } else {
          return nlohmann::json(*target);
        }
      },
      f.target);
}

}  // namespace

nlohmann::json options_to_json(TrainOptions options) {
  nlohmann::json j = nlohmann::json::object();
  for (const Flag& f : train_flags(options)) j[key_of(f.name)] = value_of(f);
  return j;
}

namespace {

// Every option at its default. Out of line: GCC 12 inlined the temporary TrainOptions into
// check_resume_compatible and reported its strings as maybe-uninitialized (a false positive).
[[gnu::noinline]] nlohmann::json default_options_json() {
  static const TrainOptions defaults;
  return options_to_json(defaults);
}

}  // namespace

void check_resume_compatible(TrainOptions options, const nlohmann::json& saved) {
  std::string diffs;
  const TrainOptions& o = options;
  const nlohmann::json defaults = default_options_json();
  for (const Flag& f : train_flags(options)) {
    if (!f.affects_trajectory) continue;
    // Resuming decides these itself (train/run_setup.cc): the global batch, --batch-size ×
    // --grad-accum × ranks, is kept whatever the number of ranks, and --max-steps / --epochs may
    // extend the run.
    if (f.name == "--batch-size" || f.name == "--grad-accum" || f.name == "--max-steps" ||
        f.name == "--epochs") {
      continue;
    }
    const std::string key = key_of(f.name);
    nlohmann::json now = value_of(f);
    // The same folder spelled another way ("m", "./m/"); a Hub repository id as the same words.
    if (f.name == "--model" && saved.contains(key) && saved[key].is_string() &&
        same_path(saved[key].get<std::string>(), o.model_dir)) {
      continue;
    }
    const nlohmann::json& was = saved.contains(key) ? saved[key] : defaults[key];
    if (was != now) {
      diffs +=
          cat(diffs.empty() ? "" : ", ", f.name, " is ", now.dump(), " but the checkpoint has ",
              was.dump(), saved.contains(key) ? "" : " (the default: it predates the flag)");
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
  // (Sentence-embedding rows are checked when they are read: train/embedding_data.h.)
  // A Hub repository id is resolved later: its data are checked when they are read.
  if (custom && !is_tagged_data(d, d.train_file) && is_directory(o.model_folder()) &&
      !trains_embeddings(o, o.model_folder()) &&
      (d.text_a_column.empty() || d.label_column.empty())) {
    throw_error(
        "--train-file needs --text-a-column and --label-column (or tagged words for token "
        "classification: a .conll file, --format conll, or JSONL with --tokens-column and "
        "--tags-column)");
  }
  if (wants_retrieval(d)) require_retrieval_flags(d);
  if (!d.dev_file.empty() && wants_retrieval(d)) {
    throw_error(
        "--queries and --dev-file: give one dev set, a retrieval set (--queries, --corpus, "
        "--qrels) or a file of examples");
  }
  if (d.train_file == "-" && d.dev_file == "-") {
    throw_error("--train-file and --dev-file cannot both be '-': standard input is read once");
  }
  if (o.head.num_labels < 0) throw_error("--num-labels must be >= 1, got ", o.head.num_labels);
  for (auto [flag, value] : {std::pair{"--epochs", o.epochs},
                             {"--lr", o.lr},
                             {"--weight-decay", o.weight_decay},
                             {"--warmup-ratio", o.warmup_ratio},
                             {"--label-smoothing-factor", o.label_smoothing},
                             {"--max-grad-norm", o.max_grad_norm},
                             {"--comm-timeout", o.dist.comm_timeout},
                             {"--comm-poll-us", o.dist.comm_poll_us},
                             {"--bucket-mb", o.dist.bucket_mb},
                             {"--early-stopping-threshold", o.best.threshold}}) {
    if (!std::isfinite(value)) throw_error(flag, " must be a finite number, got ", value);
  }
  if (o.epochs <= 0 && o.max_steps <= 0) throw_error("--epochs must be > 0 (or set --max-steps)");
  if (o.compute.batch_size <= 0) {
    throw_error("--batch-size must be > 0, got ", o.compute.batch_size);
  }
  if (o.lr < 0) throw_error("--lr must be >= 0, got ", o.lr);
  if (o.compute.max_seq_len < 2) {
    throw_error("--max-seq-len must be >= 2, got ", o.compute.max_seq_len);
  }
  if (o.grad_accum <= 0) throw_error("--grad-accum must be > 0, got ", o.grad_accum);
  if (o.warmup_steps < 0) throw_error("--warmup-steps must be >= 0");
  if (o.warmup_ratio < 0 || o.warmup_ratio > 1) throw_error("--warmup-ratio must be in [0, 1]");
  if (o.max_grad_norm < 0) throw_error("--max-grad-norm must be >= 0");
  if (o.label_smoothing < 0 || o.label_smoothing > 1) {
    throw_error("--label-smoothing-factor must be in [0, 1], got ", o.label_smoothing);
  }
  if (o.lr_scheduler_type == LrSchedule::kPolynomial && !(o.lr > kPolynomialEndLr)) {
    throw_error("--lr-scheduler-type polynomial decays to ", kPolynomialEndLr,
                ": --lr must be above it, got ", o.lr);
  }
  if (o.pad_to_multiple_of <= 0) throw_error("--pad-to-multiple-of must be > 0");
  if (o.log_every <= 0) throw_error("--log-every must be > 0");
  if (o.save_every < 0) throw_error("--save-every must be >= 0");
  if (o.dist.comm_timeout <= 0) throw_error("--comm-timeout must be > 0");
  if (o.dist.bucket_mb <= 0) throw_error("--bucket-mb must be > 0");
  if (o.save_total_limit < 0) throw_error("--save-total-limit must be >= 0 (0: keep all)");
  if (o.best.patience < 0) throw_error("--early-stopping-patience must be >= 0 (0: off)");
  if (o.best.threshold < 0) throw_error("--early-stopping-threshold must be >= 0");
  if (o.best.patience > 0 && !o.load_best_model_at_end) {
    throw_error(
        "--early-stopping-patience needs --load-best-model-at-end (as Trainer's "
        "EarlyStoppingCallback): the saved model is then the best one, not the one after the "
        "evaluations that did not improve");
  }
  if (o.load_best_model_at_end && o.eval_every.when == EvalEvery::When::kNever) {
    throw_error("--load-best-model-at-end needs evaluations; --eval-every is never");
  }
}

}  // namespace bertfit
