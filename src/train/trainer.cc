// The training loop behind `bertfit train`, for one process or N data-parallel ranks
// (mpirun -np N bertfit train ...; the command line is the same on every rank).
//
// Data: the run's sample stream (sample_stream.h) is cut into optimizer steps of
// S = batch size × accumulation × N samples; each step into micro-batches of batch × N
// samples, which the ranks split by balanced_shard (data/shuffle.h): equal row counts and
// about equal token counts, since every step waits for the slowest rank. Each rank weights its
// micro-batch's mean loss by its share of the step's samples, so the summed gradient is the mean
// over all samples of the step: N ranks × b equal 1 rank × N·b. A run covers exactly epochs·n
// samples; a checkpoint stores how many were seen, so a run can resume with the same or a different
// N.
//
// Gradients are summed across ranks by GradReducer in buckets taken from the tail of the flat
// buffer, each started as soon as backward has finished the layers it covers, on the last
// micro-batch of a step only. Rank 0 alone logs, writes metrics, checkpoints and the model;
// evaluation is split across ranks and the logits gathered.
#include "train/trainer.h"

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/check.h"
#include "base/error.h"
#include "base/file.h"
#include "base/interrupt.h"
#include "base/log.h"
#include "base/parallel.h"
#include "base/timer.h"
#include "comm/communicator.h"
#include "comm/topology.h"
#include "data/batch.h"
#include "data/shuffle.h"
#include "model/bert.h"
#include "model/model_io.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint.h"
#include "train/dataset.h"
#include "train/evaluate.h"
#include "train/optimizer.h"
#include "train/output_dir.h"
#include "train/run_log.h"
#include "train/sample_stream.h"
#include "train/step.h"

namespace bertfit {
namespace {

// Threads and pinning: ranks on one host split its cores (and any CPU quota) evenly.
void set_up_threads(const TrainOptions& o, const Communicator& comm) {
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

// Evaluation split across ranks: each computes the logits of its contiguous slice; all gather.
EvalResult distributed_eval(Communicator& comm, const BertModel& model, const float* params,
                            const std::vector<EncodedExample>& examples, const TaskInfo& task,
                            const TrainOptions& o, Activations& scratch) {
  ShardRange r = shard_range(static_cast<std::int64_t>(examples.size()), comm.rank(), comm.world());
  std::vector<EncodedExample> mine(examples.begin() + r.begin, examples.begin() + r.end);
  std::vector<float> logits =
      predict_logits(model, params, mine, o.compute.batch_size, o.pad_to_multiple_of, &scratch);
  if (comm.world() > 1) logits = comm.allgatherv(logits);
  return score_logits(logits, examples, task, model.config().num_labels);
}

TrainSummary train_with(const TrainOptions& o, Communicator* comm_ptr);

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

TrainSummary run_training(const TrainOptions& options) {
  validate_train_options(options);
  std::unique_ptr<Communicator> comm =
      make_communicator({.timeout_seconds = options.dist.comm_timeout,
                         .poll_interval_us = options.dist.comm_poll_us,
                         .grad_transport = options.dist.grad_transport});
  const InterruptGuard interrupts;  // Ctrl-C / SIGTERM stop at a step boundary
  try {
    return train_with(options, comm.get());
  } catch (const Error& e) {
    // One rank failing must end the whole job at once, not leave the others waiting for it
    // until --comm-timeout.
    if (comm->world() > 1) comm->abort(cat("rank ", comm->rank(), ": ", e.what()), 1);
    throw;
  }
}

namespace {

TrainSummary train_with(const TrainOptions& o, Communicator* comm_ptr) {
  Communicator* comm = comm_ptr;
  const int rank = comm->rank(), world = comm->world();
  set_log_config({.rank = rank, .world = world});
  set_up_threads(o, *comm);
  const DataOptions& d = o.data;

  // Everything that can fail on user input happens before the output folder is touched.
  std::string checkpoint_dir = o.resume.empty() ? "" : find_checkpoint(o.resume);
  OutputDir out(o.output_dir, o.overwrite_output_dir, o.model_dir, checkpoint_dir);
  ModelState state = load_model(checkpoint_dir.empty() ? o.model_dir : checkpoint_dir);
  WordPieceTokenizer tokenizer = WordPieceTokenizer::from_model_dir(o.model_dir);
  check_tokenizer_fits(tokenizer, state.config, o.model_dir);
  const int max_seq_len = o.compute.max_seq_len;
  if (max_seq_len > state.config.max_positions) {
    throw_error("--max-seq-len ", max_seq_len, " exceeds the model's max_position_embeddings (",
                state.config.max_positions, ") in ", o.model_dir);
  }
  TrainData train_data = load_train_data(d, state.config, o.model_dir);
  const TaskInfo& task = train_data.task;
  const LoadedExamples& train = train_data.loaded;
  check_model_fits_task(state.config, task, o.model_dir);
  if (!task.regression()) state.config.id2label = task.label_names;
  state.config.problem_type = task.problem_type();
  if (train.skipped_rows > 0) {
    log_warn(train.path, ": skipped ", train.skipped_rows, " malformed rows");
  }
  std::vector<std::pair<std::string, LoadedExamples>> dev_sets;
  if (o.eval_every.when != EvalEvery::When::kNever && (!d.task.empty() || !d.dev_file.empty())) {
    for (const std::string& split : task.eval_splits) {
      dev_sets.emplace_back(split, load_eval_examples(d, split, task));
    }
  }
  std::vector<EncodedExample> train_enc = encode_examples(tokenizer, train.examples, max_seq_len);
  std::vector<std::pair<std::string, std::vector<EncodedExample>>> dev_enc;
  for (auto& [split, loaded] : dev_sets) {
    dev_enc.emplace_back(split, encode_examples(tokenizer, loaded.examples, max_seq_len));
  }
  const ModelConfig& config = state.config;
  BertModel model(config, state.layout, runnable_precision(o.compute.precision));
  AdamW optimizer(state.layout, {.weight_decay = o.weight_decay});
  const std::int64_t n = static_cast<std::int64_t>(train_enc.size());
  const std::int64_t micro_global = std::int64_t{o.compute.batch_size} * world;
  const std::int64_t per_step = micro_global * o.grad_accum;
  // The run's sample budget and LR schedule are fixed when it starts (and kept by its
  // checkpoints): a run resumed with a different N covers the same samples on the same schedule,
  // the schedule advancing by samples seen / the original step size.
  std::int64_t total_samples =
      o.max_steps > 0 ? o.max_steps * per_step
                      : static_cast<std::int64_t>(std::ceil(o.epochs * static_cast<double>(n)));
  std::int64_t start_step = 0, start_sample = 0, sched_per_step = per_step;
  if (!checkpoint_dir.empty()) {
    nlohmann::json saved = load_checkpoint_state(checkpoint_dir, optimizer);
    check_resume_compatible(o, saved.value("options", nlohmann::json::object()));
    start_step = saved["step"].get<std::int64_t>();
    start_sample = saved.value("samples_seen", start_step * per_step);
    total_samples = saved.value("total_samples", total_samples);
    sched_per_step = saved.value("samples_per_step", per_step);
    log_info("resuming from ", checkpoint_dir, " at step ", start_step, " (", start_sample,
             " samples seen)");
  }
  if (rank == 0) out.create();
  if (!checkpoint_dir.empty()) out.keep();  // the run's checkpoint lives there
  // Every rank starts from rank 0's parameters and optimizer state. A fresh optimizer's
  // moments are zero on every rank by construction, so they travel only when resuming (saves
  // two thirds of the start-up traffic: 530 MB for DistilBERT).
  if (world > 1) {
    const std::int64_t bytes = state.layout.total() * sizeof(float);
    comm->broadcast(state.params.data(), bytes, 0);
    if (!checkpoint_dir.empty()) {
      comm->broadcast(optimizer.m().data(), bytes, 0);
      comm->broadcast(optimizer.v().data(), bytes, 0);
    }
  }
  const std::int64_t total_steps =
      start_step +
      (std::max<std::int64_t>(0, total_samples - start_sample) + per_step - 1) / per_step;
  if (start_step >= total_steps) {
    // Resuming a run that already ended: nothing to do if its model and final record are
    // there (rank 0 looks; other hosts may not see the folder).
    std::int32_t finished = rank == 0 && run_finished(out.path()) ? 1 : 0;
    if (world > 1) comm->broadcast(&finished, sizeof finished, 0);
    if (finished != 0) {
      log_info("the run in ", out.path(), " already finished at step ", total_steps,
               "; nothing to do");
      TrainSummary done;
      done.steps = total_steps;
      done.already_finished = true;
      done.rank = rank;
      return done;
    }
  }
  const std::int64_t sched_total = (total_samples + sched_per_step - 1) / sched_per_step;
  const std::int64_t warmup =
      o.warmup_steps > 0 ? o.warmup_steps
                         : static_cast<std::int64_t>(std::ceil(o.warmup_ratio * sched_total));
  std::vector<int> lengths;
  if (o.group_by_length)
    for (const EncodedExample& e : train_enc) lengths.push_back(static_cast<int>(e.ids.size()));
  // Runs of 50 global steps (sched_per_step is the checkpoint's, so a resumed run with the same
  // global batch groups alike whatever the number of ranks).
  SampleStream stream(n, static_cast<std::uint64_t>(o.seed), !o.no_shuffle, std::move(lengths),
                      o.group_by_length ? 50 * sched_per_step : 0);
  BatchOptions batch_options;
  batch_options.pad_to_multiple_of = o.pad_to_multiple_of;
  if (o.pad_to_max_length) batch_options.fixed_len = max_seq_len;
  batch_options.max_len = config.max_positions;
  if (task.problem == ProblemType::kMultiLabel)
    batch_options.multi_label_classes = config.num_labels;
  TrainStep train_step(model, optimizer, comm, static_cast<std::uint64_t>(o.seed),
                       {.bucket_bytes = static_cast<std::int64_t>(o.dist.bucket_mb * 1024 * 1024),
                        .wire = o.dist.grad_comm_dtype});
  std::unique_ptr<RunLog> run_log;
  if (rank == 0) run_log = std::make_unique<RunLog>(join_path(out.path(), "metrics.jsonl"));
  log_info("training ", task.name, ": ", n, " examples, ", total_steps - start_step, " steps of ",
           per_step, " samples (", world, world > 1 ? " ranks × " : " rank × ",
           o.compute.batch_size, " × ", o.grad_accum, " accumulation), ", num_threads(),
           " threads");

  TrainSummary summary;
  auto run_eval = [&](std::int64_t step, double epoch) {
    for (auto& [split, enc] : dev_enc) {
      EvalResult r = distributed_eval(*comm, model, state.params.data(), enc, task, o,
                                      train_step.activations());
      summary.dev_metrics = r.metrics;
      if (rank != 0) continue;
      nlohmann::json rec{{"step", step},
                         {"epoch", epoch},
                         {"split", split},
                         {"eval_loss", r.loss},
                         {"eval_examples", r.examples}};
      for (auto& [name, value] : r.metrics) rec["eval_" + name] = value;
      run_log->record(rec);
      log_info("eval ", split, " at step ", step, ": ", rec.dump());
    }
  };
  std::int64_t last_checkpoint = checkpoint_dir.empty() ? -1 : start_step;
  auto checkpoint = [&](std::int64_t step, std::int64_t samples_seen) {
    if (rank != 0) return;
    nlohmann::json st{{"step", step},
                      {"total_steps", total_steps},
                      {"samples_seen", samples_seen},
                      {"total_samples", total_samples},
                      {"samples_per_step", sched_per_step},
                      {"world", world},
                      {"task", task.name},
                      {"options", options_to_json(o)}};
    save_checkpoint(out.path(), state, o.model_dir, optimizer, st);
    out.keep();
    last_checkpoint = step;
  };

  Timer train_timer;
  double train_seconds = 0, window_loss = 0, exposed_comm = 0;
  // Where the steps' time goes (since the first step; logged cumulative like exposed_comm_s).
  double forward_s = 0, backward_s = 0, update_s = 0;
  const double comm_cpu_at_start = comm->thread_cpu_seconds();
  std::int64_t window_steps = 0, samples_done = 0;
  bool evaluated_last = false;
  for (std::int64_t step = start_step; step < total_steps; ++step) {
    Timer step_timer;
    const std::int64_t first = start_sample + (step - start_step) * per_step;
    const std::int64_t last = std::min(first + per_step, total_samples);
    // This rank's part of each micro-batch of the step; ranks split each by token counts.
    std::vector<MicroBatch> micro;
    for (std::int64_t g = first; g < last; g += micro_global) {
      const std::int64_t count = std::min(micro_global, last - g);
      std::vector<std::int64_t> rows(count), costs(count);
      for (std::int64_t i = 0; i < count; ++i) {
        rows[i] = stream.row(g + i);
        costs[i] = static_cast<std::int64_t>(train_enc[rows[i]].ids.size());
      }
      if (world > 1) {
        std::vector<std::int64_t> positions = balanced_shard(costs, rank, world), all = rows;
        rows.clear();
        for (std::int64_t p : positions) rows.push_back(all[p]);
      }
      MicroBatch& m = micro.emplace_back();
      m.share = static_cast<float>(rows.size()) / static_cast<float>(last - first);
      if (!rows.empty()) m.batch = make_batch(train_enc, rows, batch_options);
    }
    const double lr =
        linear_schedule_lr(o.lr, static_cast<double>(first) / sched_per_step, warmup, sched_total);
    const StepReport report = train_step.run(state.params.data(), micro, step, lr, o.max_grad_norm,
                                             InterruptGuard::requested());
    if (!report.applied) {
      throw_error("step ", step + 1, ": the loss is ", report.loss, " and the gradient norm ",
                  report.grad_norm, "; training stopped and no model was written. ",
                  last_checkpoint >= 0 ? cat("The last good checkpoint (step ", last_checkpoint,
                                             ") is in ", join_path(out.path(), "checkpoint"), ". ")
                                       : std::string(),
                  "Lower --lr (now ", o.lr, ") or check the labels");
    }
    const double step_loss = report.loss, norm = report.grad_norm;
    forward_s += report.forward_s;
    backward_s += report.backward_s;
    update_s += report.update_s;
    exposed_comm += report.exposed_comm_s;
    samples_done += last - first;
    window_loss += step_loss;
    ++window_steps;
    summary.final_loss = step_loss;
    evaluated_last = false;

    const std::int64_t done = step + 1;
    const double epoch = static_cast<double>(last) / static_cast<double>(n);
    if (rank == 0 && (done % o.log_every == 0 || done == total_steps)) {
      double elapsed = train_seconds + train_timer.seconds();
      double rate = samples_done / std::max(elapsed, 1e-9);
      nlohmann::json rec{{"step", done},
                         {"epoch", epoch},
                         {"loss", window_loss / window_steps},
                         {"lr", lr},
                         {"grad_norm", norm},
                         {"samples_per_s", rate},
                         {"step_seconds", step_timer.seconds()},
                         {"forward_s", forward_s},
                         {"backward_s", backward_s},
                         {"update_s", update_s}};
      if (world > 1) {
        rec["exposed_comm_s"] = exposed_comm;
        // CPU of this rank's communication threads since the first step (cumulative, like
        // exposed_comm_s): under a CPU quota it comes out of compute.
        rec["comm_cpu_s"] = comm->thread_cpu_seconds() - comm_cpu_at_start;
      }
      run_log->record(rec);
      run_log->progress(done, total_steps, window_loss / window_steps, lr, rate,
                        (total_samples - last) / std::max(rate, 1e-9));
    }
    if (done % o.log_every == 0) {
      window_loss = 0;
      window_steps = 0;
    }
    const bool epoch_end = last / n > first / n;
    const EvalEvery& every = o.eval_every;
    const bool want_eval =
        !dev_enc.empty() &&
        ((every.when == EvalEvery::When::kEpoch && epoch_end) ||
         (every.when == EvalEvery::When::kSteps && done % every.steps == 0) || done == total_steps);
    if (want_eval) {
      train_seconds += train_timer.seconds();
      if (run_log) run_log->end_progress();
      run_eval(done, epoch);
      evaluated_last = true;
      train_timer.reset();
    }
    const bool want_save = o.save_every > 0 ? done % o.save_every == 0 : want_eval;
    const bool interrupted = report.stop && done < total_steps;
    if (want_save || done == total_steps || (interrupted && last_checkpoint != done)) {
      train_seconds += train_timer.seconds();
      checkpoint(done, last);
      train_timer.reset();
    }
    if (interrupted) {
      if (run_log) run_log->end_progress();
      if (world > 1) comm->barrier();  // rank 0's checkpoint is complete before anyone exits
      const int sig = InterruptGuard::signal() != 0 ? InterruptGuard::signal() : SIGINT;
      throw Error(
          cat("interrupted at step ", done, " of ", total_steps, "; the checkpoint is in ",
              join_path(out.path(), "checkpoint"), ". Continue with the same command and --resume ",
              join_path(out.path(), "checkpoint")),
          128 + sig);
    }
  }
  train_seconds += train_timer.seconds();
  if (run_log) run_log->end_progress();
  if (!evaluated_last && !dev_enc.empty() && start_step == total_steps) {
    run_eval(total_steps, static_cast<double>(total_samples) / static_cast<double>(n));
  }
  if (rank == 0) save_model(out.path(), state, o.model_dir);

  summary.steps = total_steps;
  summary.seconds = train_seconds;
  summary.samples_per_second = samples_done / std::max(train_seconds, 1e-9);
  if (rank == 0) {
    nlohmann::json final_rec{{"final", true},
                             {"steps", total_steps},
                             {"world", world},
                             {"train_seconds", train_seconds},
                             {"train_samples_per_s", summary.samples_per_second}};
    if (total_steps > start_step) final_rec["loss"] = summary.final_loss;
    if (world > 1) final_rec["exposed_comm_s"] = exposed_comm;
    for (auto& [name, value] : summary.dev_metrics) final_rec["eval_" + name] = value;
    run_log->record(final_rec);
    run_log.reset();
    out.commit();
  }
  if (world > 1) comm->barrier();
  summary.rank = rank;
  return summary;
}

}  // namespace
}  // namespace bertfit
