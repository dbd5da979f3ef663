// The set-up of a training run (see run_setup.h).
#include "train/run_setup.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "base/parallel.h"
#include "comm/topology.h"
#include "data/shuffle.h"
#include "io/json.h"
#include "model/architecture.h"
#include "model/head.h"
#include "task/evaluate.h"
#include "task/retrieval_data.h"
#include "task/tagged_data.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint.h"
#include "train/embedding_data.h"
#include "train/loss_setup.h"
#include "train/pair_objective.h"

namespace bertfit {
namespace {

// Reads and encodes the run's examples, and decides the task and the model's config for it
// (labels and problem type, saved with the model) from the config.json and the weights'
// classifier of `source` (the model, or the checkpoint resumed).
RunData load_run_data(const TrainOptions& o, const std::string& source) {
  if (trains_embeddings(o, source)) return load_embedding_data(o, source);
  if (wants_retrieval(o.data)) {
    throw_error(!o.data.queries_file.empty()  ? "--queries"
                : !o.data.corpus_file.empty() ? "--corpus"
                                              : "--qrels",
                ": the retrieval evaluation is for sentence-embedding runs; this run trains a "
                "classifier (--objective embedding trains sentence embeddings)");
  }
  const std::string& model = o.model_folder();
  const std::string config_path = join_path(source, "config.json");
  if (is_directory(source) && !path_exists(config_path)) {
    throw_error(source, ": no config.json in the model folder");
  }
  model_weights_path(source);  // the folder's errors before config.json's
  const nlohmann::json hf = read_json_file(config_path);
  const ModelConfig config = parse_model_config_json(hf, config_path);
  const DataOptions& d = o.data;
  const bool tagged = is_tagged_data(d, d.train_file);
  // The checkpoint's head for this run's (the data's: tags or sentence labels), found by name as
  // from_pretrained finds it, unless config.json's architectures names another class (a base
  // model, another task's head): then a new one is started, its labels from the data.
  ModelConfig run_config = config;
  run_config.head = tagged ? HeadKind::kTokenClassification : HeadKind::kSequenceClassification;
  std::optional<int> head_outputs = checkpoint_head_outputs(source, run_config);
  if (!other_architecture(hf, *config.family, run_config.head, config_path).empty()) {
    head_outputs.reset();
  }
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(model);
  check_tokenizer_fits(*tokenizer, config, model);
  const int max_seq_len = o.compute.max_seq_len;
  if (max_seq_len > config.max_tokens()) {
    throw_error("--max-seq-len ", max_seq_len, " exceeds the ", config.max_tokens(),
                " tokens the model's max_position_embeddings (", config.max_positions, ") hold in ",
                model);
  }
  const bool evaluates =
      o.eval_every.when != EvalEvery::When::kNever && (!d.task.empty() || !d.dev_file.empty());
  if (tagged) {
    TrainData train = load_tagged_train_data(d, o.head, config, head_outputs, source);
    RunData data;
    data.task = train.task;
    data.config = train.config;
    data.new_head = train.new_head;
    data.train = encode_tagged(*tokenizer, train.tagged, train.task.label_names, max_seq_len);
    report_word_truncation(train.tagged.path, data.train, max_seq_len);
    drop_unlabelled(train.tagged.path, data.train);
    if (evaluates) {
      const LoadedTagged dev = load_eval_tagged(d, data.task);
      data.dev.emplace_back("dev",
                            encode_tagged(*tokenizer, dev, data.task.label_names, max_seq_len));
      report_word_truncation(dev.path, data.dev.back().second, max_seq_len);
    }
    return data;
  }
  TrainData train_data = load_train_data(d, o.head, config, head_outputs, source);
  const TaskInfo& task = train_data.task;
  const LoadedExamples& train = train_data.loaded;
  if (train.skipped_rows > 0) {
    log_warn(train.path, ": skipped ", train.skipped_rows, " malformed rows");
  }
  std::vector<std::pair<std::string, LoadedExamples>> dev_sets;
  if (evaluates) {
    for (const std::string& split : task.eval_splits) {
      dev_sets.emplace_back(split, load_eval_examples(d, split, task));
    }
  }
  RunData data;
  data.task = task;
  data.config = train_data.config;
  data.new_head = train_data.new_head;
  data.train = encode_examples(*tokenizer, train.examples, max_seq_len);
  report_truncation(train.path, data.train, max_seq_len);
  for (auto& [split, loaded] : dev_sets) {
    data.dev.emplace_back(split, encode_examples(*tokenizer, loaded.examples, max_seq_len));
    report_truncation(loaded.path, data.dev.back().second, max_seq_len);
  }
  return data;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The samples a run of `per_step` samples per step covers: --max-steps steps, else --epochs.
std::int64_t run_samples(const TrainOptions& o, std::int64_t n, std::int64_t per_step) {
  return o.max_steps > 0 ? o.max_steps * per_step
                         : static_cast<std::int64_t>(std::ceil(o.epochs * static_cast<double>(n)));
}

// Warmup steps of a schedule of `total` steps (Trainer's get_warmup_steps).
std::int64_t warmup_steps(const TrainOptions& o, std::int64_t total) {
  return o.warmup_steps > 0 ? o.warmup_steps
                            : static_cast<std::int64_t>(std::ceil(o.warmup_ratio * total));
}

// Reads the checkpoint's optimizer state and position into `optimizer` and `p`, after checking
// that the run's options match the ones it was started with. The global batch is the
// checkpoint's (the shape per rank adapts to `world`); a changed --max-steps or --epochs
// sets the run's new length, which may not end before the checkpoint.
void resume_from(const std::string& checkpoint_dir, const TrainOptions& o, int world,
                 AdamW& optimizer, RunPlan& p) {
  const nlohmann::json saved = load_checkpoint_state(checkpoint_dir, optimizer);
  const nlohmann::json opts = saved.value("options", nlohmann::json::object());
  check_resume_compatible(o, opts);
  const TrainOptions defaults;
  std::int64_t global = 0, saved_total = 0, saved_max_steps = 0;
  double saved_epochs = 0;
  StepShape was;
  int saved_world = 1;
  try {
    was = {opts.value("batch-size", defaults.compute.batch_size),
           opts.value("grad-accum", defaults.grad_accum)};
    saved_world = saved.value("world", 1);
    global = saved.value("samples_per_step", std::int64_t{was.batch} * was.accum * saved_world);
    p.start_step = saved["step"].get<std::int64_t>();
    p.start_sample = saved.value("samples_seen", p.start_step * global);
    saved_total = saved.value("total_samples", run_samples(o, p.n, global));
    saved_max_steps = opts.value("max-steps", defaults.max_steps);
    saved_epochs = opts.value("epochs", defaults.epochs);
  } catch (const nlohmann::json::exception& e) {
    throw_error(join_path(checkpoint_dir, "trainer_state.json"), ": ", e.what());
  }
  if (global <= 0 || was.batch <= 0 || was.accum <= 0 || saved_world <= 0) {
    throw_error(join_path(checkpoint_dir, "trainer_state.json"), ": invalid batch sizes");
  }
  std::string note;
  const StepShape shape = resume_step_shape(global, was, saved_world,
                                            {o.compute.batch_size, o.grad_accum}, world, &note);
  p.batch = shape.batch;
  p.accum = shape.accum;
  p.micro_global = std::int64_t{shape.batch} * world;
  p.per_step = global;
  p.sched_per_step = global;
  p.restored_sched_total = ceil_div(saved_total, global);
  p.restored_warmup = warmup_steps(o, p.restored_sched_total);
  const bool same_length = saved_max_steps == o.max_steps && saved_epochs == o.epochs;
  p.total_samples = same_length ? saved_total : run_samples(o, p.n, global);
  if (p.total_samples < p.start_sample) {
    if (o.max_steps > 0) {
      throw_error("--resume: --max-steps ", o.max_steps, " is fewer than the ", p.start_step,
                  " steps the checkpoint has done; give at least ", p.start_step);
    }
    throw_error("--resume: --epochs ", o.epochs, " is ", p.total_samples,
                " samples, fewer than the ", p.start_sample, " the checkpoint has seen (",
                static_cast<double>(p.start_sample) / static_cast<double>(p.n), " epochs)");
  }
  log_info("resuming from ", checkpoint_dir, " at step ", p.start_step, " (", p.start_sample,
           " samples seen)");
  if (!note.empty()) log_info(note);
  if (p.total_samples != saved_total) {
    log_info("the run's length changes from ", saved_total, " to ", p.total_samples, " samples (",
             ceil_div(p.total_samples, global), " steps); the LR schedule follows the new length");
  }
}

RunPlan plan_run(const TrainOptions& o, int world, std::int64_t n,
                 const std::string& checkpoint_dir, AdamW& optimizer) {
  RunPlan p;
  p.n = n;
  p.batch = o.compute.batch_size;
  p.accum = o.grad_accum;
  p.micro_global = std::int64_t{p.batch} * world;
  p.per_step = p.micro_global * p.accum;
  p.total_samples = run_samples(o, n, p.per_step);
  p.sched_per_step = p.per_step;
  if (!checkpoint_dir.empty()) resume_from(checkpoint_dir, o, world, optimizer, p);
  p.total_steps = p.start_step +
                  ceil_div(std::max<std::int64_t>(0, p.total_samples - p.start_sample), p.per_step);
  p.sched_total = ceil_div(p.total_samples, p.sched_per_step);
  p.warmup = warmup_steps(o, p.sched_total);
  if (checkpoint_dir.empty()) {
    p.restored_sched_total = p.sched_total;
    p.restored_warmup = p.warmup;
  }
  return p;
}

// Runs of 50 global steps when grouping by length (sched_per_step is the checkpoint's, so a
// resumed run with the same global batch groups alike whatever the number of ranks).
SampleStream make_stream(const TrainOptions& o, const RunData& data, const RunPlan& plan) {
  std::vector<int> lengths;
  if (o.group_by_length) {
    const int k = data.texts_per_sample;
    for (std::int64_t i = 0; i < data.samples(); ++i) {
      int length = 0;
      for (int c = 0; c < k; ++c) length += static_cast<int>(data.train[i * k + c].ids.size());
      lengths.push_back(length);
    }
  }
  return SampleStream(plan.n, static_cast<std::uint64_t>(o.seed), !o.no_shuffle, std::move(lengths),
                      o.group_by_length ? 50 * plan.sched_per_step : 0);
}

// The best model is chosen by the loss unless a metric is named (Trainer's default); the
// evaluations of sentence-embedding runs report no loss, so there it is chosen by their main
// metric: spearman_cosine for scored pairs, cosine_ndcg@10 for a retrieval set (as
// sentence-transformers v3's evaluators; 2.2.2's returned map@100: --metric-for-best-model
// cosine_map@100).
BestModelOptions best_model_options(const TrainOptions& o, const RunData& data) {
  BestModelOptions best = o.best;
  if (data.pair_loss && (best.metric == "loss" || best.metric == "eval_loss")) {
    best.metric = task_metric_names(data.task).front();
  }
  return best;
}

BatchOptions make_batch_options(const TrainOptions& o, const ModelConfig& config,
                                const TaskInfo& task) {
  BatchOptions b;
  b.pad_to_multiple_of = o.pad_to_multiple_of;
  if (o.pad_to_max_length) b.fixed_len = o.compute.max_seq_len;
  b.max_len = config.max_tokens();
  if (task.problem == ProblemType::kMultiLabel) b.multi_label_classes = config.num_labels;
  b.token_labels = task.head == HeadKind::kTokenClassification;
  return b;
}

// The folder holds a saved model and metrics.jsonl ends with the run's final record.
bool run_finished(const std::string& dir) {
  const std::string metrics = join_path(dir, "metrics.jsonl");
  if (!path_exists(join_path(dir, "model.safetensors")) || !path_exists(metrics)) return false;
  const std::string text = read_file(metrics);
  const auto end = text.find_last_not_of('\n');
  if (end == std::string::npos) return false;
  const auto begin = text.rfind('\n', end);
  const std::size_t start = begin == std::string::npos ? 0 : begin + 1;
  const std::string last = text.substr(start, end + 1 - start);
  nlohmann::json j = nlohmann::json::parse(last, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.value("final", false);
}

}  // namespace

std::string set_up_process(const TrainOptions& o, const Communicator& comm) {
  set_log_config({.rank = comm.rank(), .world = comm.world()});
  int threads = o.compute.threads;
  std::string line;
  if (!o.dist.no_pin) {
    CpuShare share = cpu_share(comm.local_rank(), comm.local_world());
    int share_threads = apply_cpu_share(share);
    if (threads <= 0) threads = share_threads;
    if (comm.world() > 1 || log_config().verbose) {
      line = cat(describe(comm), ": ", describe_share(share), ", ", threads, " threads");
    }
  }
  if (threads > 0) set_num_threads(threads);
  return line;
}

TrainRun::TrainRun(const TrainOptions& train_options, Communicator& communicator)
    : options(train_options),
      comm(communicator),
      rank(comm.rank()),
      world(comm.world()),
      checkpoint_dir(options.resume.empty() ? "" : find_checkpoint(options.resume)),
      out(options.output_dir, options.overwrite_output_dir, options.model_folder(), checkpoint_dir),
      data(
          load_run_data(options, checkpoint_dir.empty() ? options.model_folder() : checkpoint_dir)),
      best(best_model_options(options, data), task_metric_names(data.task)),
      state(load_model(checkpoint_dir.empty() ? options.model_folder() : checkpoint_dir,
                       {.config = &data.config, .reinit_mismatched_head = data.new_head})),
      model(state.config, state.layout, runnable_precision(options.compute.precision)),
      optimizer(state.layout, {.weight_decay = options.weight_decay}),
      plan(plan_run(options, world, data.samples(), checkpoint_dir, optimizer)),
      stream(make_stream(options, data, plan)),
      batch_options(make_batch_options(options, state.config, data.task)),
      step(model, optimizer, &comm, static_cast<std::uint64_t>(options.seed),
           {.bucket_bytes = static_cast<std::int64_t>(options.dist.bucket_mb * 1024 * 1024),
            .wire = options.dist.grad_comm_dtype}) {
  if (options.load_best_model_at_end && data.dev.empty()) {
    throw_error(
        "--load-best-model-at-end needs a dev set to evaluate on: give --dev-file (or, for "
        "sentence embeddings, --queries, --corpus and --qrels)");
  }
  if (!checkpoint_dir.empty()) {
    const nlohmann::json saved = read_trainer_state(checkpoint_dir);
    best.restore(saved.value("best", nlohmann::json()));
    stopped_early = saved.value("stopped_early", false);
  }
  model.set_loss_options(
      make_loss_options(options, data.task, state.config.num_labels, data.train));
  if (data.pair_loss) {
    // Saved as a sentence-transformers folder: the source's modules (load_model kept them), or
    // a plain encoder's --pooling.
    if (!state.sentence_transformer) {
      state.sentence_transformer = plain_encoder_modules(options, state.config);
    }
    step.use_objective(std::make_unique<PairObjective>(
        *data.pair_loss, data.loss_scale, data.texts_per_sample,
        model_head(state.config).output_width(state.config), &comm));
  }
}

void TrainRun::start() {
  if (rank == 0) out.create();
  if (!checkpoint_dir.empty()) out.keep();  // the run's checkpoint lives there
  // Every rank starts from rank 0's parameters and optimizer state. A fresh optimizer's
  // moments are zero on every rank by construction, so they travel only when resuming (saves
  // two thirds of the start-up traffic: 530 MB for DistilBERT).
  if (world > 1) {
    const std::int64_t bytes = state.layout.total() * sizeof(float);
    comm.broadcast(state.params.data(), bytes, 0);
    if (!checkpoint_dir.empty()) {
      comm.broadcast(optimizer.m().data(), bytes, 0);
      comm.broadcast(optimizer.v().data(), bytes, 0);
    }
  }
  if (plan.start_step >= plan.total_steps || stopped_early) {
    // Resuming a run that already ended: nothing to do if its model and final record are
    // there (rank 0 looks; other hosts may not see the folder).
    std::int32_t finished = rank == 0 && run_finished(out.path()) ? 1 : 0;
    if (world > 1) comm.broadcast(&finished, sizeof finished, 0);
    already_finished = finished != 0;
  }
}

std::vector<MicroBatch> TrainRun::step_batches(std::int64_t first, std::int64_t last) {
  // Each micro-batch's loss is a (weighted) mean over its rows; its share is its part of the
  // step's total weight, so the step's loss is the weighted mean over all the step's samples
  // however the step is split. Every rank sees the step's rows, hence the same total.
  const LossOptions& loss = model.loss_options();
  double step_weight = static_cast<double>(last - first);
  if (!loss.class_weights.empty()) {
    step_weight = 0;
    for (std::int64_t i = first; i < last; ++i) {
      step_weight += sample_weight(loss, data.train[stream.row(i)]);
    }
  }
  const int k = data.texts_per_sample;
  std::vector<MicroBatch> micro;
  for (std::int64_t g = first; g < last; g += plan.micro_global) {
    const std::int64_t count = std::min(plan.micro_global, last - g);
    std::vector<std::int64_t> rows(count), costs(count, 0);
    for (std::int64_t i = 0; i < count; ++i) {
      rows[i] = stream.row(g + i);
      for (int c = 0; c < k; ++c) {
        costs[i] += static_cast<std::int64_t>(data.train[rows[i] * k + c].ids.size());
      }
    }
    if (world > 1) {
      std::vector<std::int64_t> positions = balanced_shard(costs, rank, world), all = rows;
      rows.clear();
      for (std::int64_t p : positions) rows.push_back(all[p]);
    }
    MicroBatch& m = micro.emplace_back();
    if (loss.class_weights.empty()) {
      m.share = static_cast<float>(rows.size()) / static_cast<float>(last - first);
    } else {
      double weight = 0;
      for (std::int64_t r : rows) weight += sample_weight(loss, data.train[r]);
      m.share = static_cast<float>(weight / step_weight);
    }
    if (rows.empty()) continue;
    // A sample's texts go column by column: every first text, then every second, ...
    std::vector<std::int64_t> texts;
    texts.reserve(rows.size() * k);
    for (int c = 0; c < k; ++c) {
      for (std::int64_t r : rows) texts.push_back(r * k + c);
    }
    m.batch = make_batch(data.train, texts, batch_options);
  }
  return micro;
}

double TrainRun::lr_at(std::int64_t first) const {
  // The first step after a checkpoint applies the LR of the schedule it was written under:
  // Trainer loads the optimizer's state, LR included, and its scheduler sets the new schedule's
  // LR only after that step (the same value unless --resume changed the run's length).
  const bool restored = first == plan.start_sample && plan.start_step > 0;
  return schedule_lr(options.lr_scheduler_type, options.lr,
                     static_cast<double>(first) / plan.sched_per_step,
                     restored ? plan.restored_warmup : plan.warmup,
                     restored ? plan.restored_sched_total : plan.sched_total);
}

}  // namespace bertfit
