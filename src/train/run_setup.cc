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
#include "task/evaluate.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint.h"
#include "train/loss_setup.h"

namespace bertfit {
namespace {

// Reads and encodes the run's examples, and decides the task and the model's config for it
// (labels and problem type, saved with the model) from the config.json and the weights'
// classifier of `source` (the model, or the checkpoint resumed).
RunData load_run_data(const TrainOptions& o, const std::string& source) {
  const std::string& model = o.model_folder();
  const std::string config_path = join_path(source, "config.json");
  if (is_directory(source) && !path_exists(config_path)) {
    throw_error(source, ": no config.json in the model folder");
  }
  const std::optional<int> head_outputs = checkpoint_head_outputs(source);
  const ModelConfig config = load_model_config(config_path);
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(model);
  check_tokenizer_fits(*tokenizer, config, model);
  const int max_seq_len = o.compute.max_seq_len;
  if (max_seq_len > config.max_positions) {
    throw_error("--max-seq-len ", max_seq_len, " exceeds the model's max_position_embeddings (",
                config.max_positions, ") in ", model);
  }
  const DataOptions& d = o.data;
  TrainData train_data = load_train_data(d, o.head, config, head_outputs, source);
  const TaskInfo& task = train_data.task;
  const LoadedExamples& train = train_data.loaded;
  if (train.skipped_rows > 0) {
    log_warn(train.path, ": skipped ", train.skipped_rows, " malformed rows");
  }
  std::vector<std::pair<std::string, LoadedExamples>> dev_sets;
  if (o.eval_every.when != EvalEvery::When::kNever && (!d.task.empty() || !d.dev_file.empty())) {
    for (const std::string& split : task.eval_splits) {
      dev_sets.emplace_back(split, load_eval_examples(d, split, task));
    }
  }
  RunData data{task,
               train_data.config,
               train_data.new_head,
               encode_examples(*tokenizer, train.examples, max_seq_len),
               {}};
  report_truncation(train.path, data.train, max_seq_len);
  for (auto& [split, loaded] : dev_sets) {
    data.dev.emplace_back(split, encode_examples(*tokenizer, loaded.examples, max_seq_len));
    report_truncation(loaded.path, data.dev.back().second, max_seq_len);
  }
  return data;
}

// Reads the checkpoint's optimizer state and position into `optimizer` and `plan`, after
// checking that the run's options match the ones it was started with.
void resume_from(const std::string& checkpoint_dir, const TrainOptions& o, AdamW& optimizer,
                 RunPlan& plan) {
  nlohmann::json saved = load_checkpoint_state(checkpoint_dir, optimizer);
  check_resume_compatible(o, saved.value("options", nlohmann::json::object()));
  plan.start_step = saved["step"].get<std::int64_t>();
  plan.start_sample = saved.value("samples_seen", plan.start_step * plan.per_step);
  plan.total_samples = saved.value("total_samples", plan.total_samples);
  plan.sched_per_step = saved.value("samples_per_step", plan.per_step);
  log_info("resuming from ", checkpoint_dir, " at step ", plan.start_step, " (", plan.start_sample,
           " samples seen)");
}

RunPlan plan_run(const TrainOptions& o, int world, std::int64_t n,
                 const std::string& checkpoint_dir, AdamW& optimizer) {
  RunPlan p;
  p.n = n;
  p.micro_global = std::int64_t{o.compute.batch_size} * world;
  p.per_step = p.micro_global * o.grad_accum;
  p.total_samples = o.max_steps > 0
                        ? o.max_steps * p.per_step
                        : static_cast<std::int64_t>(std::ceil(o.epochs * static_cast<double>(n)));
  p.sched_per_step = p.per_step;
  if (!checkpoint_dir.empty()) resume_from(checkpoint_dir, o, optimizer, p);
  p.total_steps =
      p.start_step +
      (std::max<std::int64_t>(0, p.total_samples - p.start_sample) + p.per_step - 1) / p.per_step;
  p.sched_total = (p.total_samples + p.sched_per_step - 1) / p.sched_per_step;
  p.warmup = o.warmup_steps > 0
                 ? o.warmup_steps
                 : static_cast<std::int64_t>(std::ceil(o.warmup_ratio * p.sched_total));
  return p;
}

// Runs of 50 global steps when grouping by length (sched_per_step is the checkpoint's, so a
// resumed run with the same global batch groups alike whatever the number of ranks).
SampleStream make_stream(const TrainOptions& o, const std::vector<EncodedExample>& train,
                         const RunPlan& plan) {
  std::vector<int> lengths;
  if (o.group_by_length) {
    for (const EncodedExample& e : train) lengths.push_back(static_cast<int>(e.ids.size()));
  }
  return SampleStream(plan.n, static_cast<std::uint64_t>(o.seed), !o.no_shuffle, std::move(lengths),
                      o.group_by_length ? 50 * plan.sched_per_step : 0);
}

BatchOptions make_batch_options(const TrainOptions& o, const ModelConfig& config,
                                const TaskInfo& task) {
  BatchOptions b;
  b.pad_to_multiple_of = o.pad_to_multiple_of;
  if (o.pad_to_max_length) b.fixed_len = o.compute.max_seq_len;
  b.max_len = config.max_positions;
  if (task.problem == ProblemType::kMultiLabel) b.multi_label_classes = config.num_labels;
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

void set_up_process(const TrainOptions& o, const Communicator& comm) {
  set_log_config({.rank = comm.rank(), .world = comm.world()});
  int threads = o.compute.threads;
  if (!o.dist.no_pin) {
    CpuShare share = cpu_share(comm.local_rank(), comm.local_world());
    int share_threads = apply_cpu_share(share);
    if (threads <= 0) threads = share_threads;
    if (comm.world() > 1 || log_config().verbose) {
      log_line("info", cat(describe(comm), ": ", describe_share(share), ", ", threads, " threads"));
    }
  }
  if (threads > 0) set_num_threads(threads);
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
      best(options.best, task_metric_names(data.task)),
      state(load_model(checkpoint_dir.empty() ? options.model_folder() : checkpoint_dir,
                       {.config = &data.config, .reinit_mismatched_head = data.new_head})),
      model(state.config, state.layout, runnable_precision(options.compute.precision)),
      optimizer(state.layout, {.weight_decay = options.weight_decay}),
      plan(plan_run(options, world, static_cast<std::int64_t>(data.train.size()), checkpoint_dir,
                    optimizer)),
      stream(make_stream(options, data.train, plan)),
      batch_options(make_batch_options(options, state.config, data.task)),
      step(model, optimizer, &comm, static_cast<std::uint64_t>(options.seed),
           {.bucket_bytes = static_cast<std::int64_t>(options.dist.bucket_mb * 1024 * 1024),
            .wire = options.dist.grad_comm_dtype}) {
  if (options.load_best_model_at_end && data.dev.empty()) {
    throw_error("--load-best-model-at-end needs a dev set to evaluate on: give --dev-file");
  }
  if (!checkpoint_dir.empty()) {
    const nlohmann::json saved = read_trainer_state(checkpoint_dir);
    best.restore(saved.value("best", nlohmann::json()));
    stopped_early = saved.value("stopped_early", false);
  }
  model.set_loss_options(
      make_loss_options(options, data.task, state.config.num_labels, data.train));
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
  std::vector<MicroBatch> micro;
  for (std::int64_t g = first; g < last; g += plan.micro_global) {
    const std::int64_t count = std::min(plan.micro_global, last - g);
    std::vector<std::int64_t> rows(count), costs(count);
    for (std::int64_t i = 0; i < count; ++i) {
      rows[i] = stream.row(g + i);
      costs[i] = static_cast<std::int64_t>(data.train[rows[i]].ids.size());
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
    if (!rows.empty()) m.batch = make_batch(data.train, rows, batch_options);
  }
  return micro;
}

double TrainRun::lr_at(std::int64_t first) const {
  return schedule_lr(options.lr_scheduler_type, options.lr,
                     static_cast<double>(first) / plan.sched_per_step, plan.warmup,
                     plan.sched_total);
}

}  // namespace bertfit
