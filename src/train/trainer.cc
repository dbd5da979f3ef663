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
//
// This file is the loop: each step (train/step.h), then logging, evaluation, checkpoints and
// stopping on an interrupt, and the end of the run. Everything before the first step (loading,
// resuming, sharding) is run_setup.h's.
#include "train/trainer.h"

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "base/interrupt.h"
#include "base/log.h"
#include "base/parallel.h"
#include "base/timer.h"
#include "comm/communicator.h"
#include "data/shuffle.h"
#include "model/model_io.h"
#include "task/evaluate.h"
#include "train/checkpoint.h"
#include "train/run_log.h"
#include "train/run_setup.h"

namespace bertfit {
namespace {

// Evaluation split across ranks: each computes the logits of its contiguous slice; all gather.
EvalResult distributed_eval(TrainRun& run, const std::vector<EncodedExample>& examples) {
  Communicator& comm = run.comm;
  ShardRange r = shard_range(static_cast<std::int64_t>(examples.size()), comm.rank(), comm.world());
  std::vector<EncodedExample> mine(examples.begin() + r.begin, examples.begin() + r.end);
  std::vector<float> logits =
      predict_logits(run.model, run.state.params.data(), mine, run.options.compute.batch_size,
                     run.options.pad_to_multiple_of, &run.step.activations());
  if (comm.world() > 1) logits = comm.allgatherv(logits);
  return score_logits(logits, examples, run.data.task, run.model.config().num_labels);
}

// The steps of a run and what happens between them.
class TrainLoop {
 public:
  explicit TrainLoop(TrainRun& run);
  TrainSummary run();

 private:
  void add_to_totals(const StepReport& report, std::int64_t samples);
  void log_step(std::int64_t done, double epoch, double lr, const StepReport& report,
                double step_seconds, std::int64_t last);
  bool wants_eval(std::int64_t done, std::int64_t first, std::int64_t last) const;
  // Evaluates on every dev split; the first split's result goes to the best-model tracker.
  void evaluate(std::int64_t step, double epoch);
  void checkpoint(std::int64_t step, std::int64_t samples_seen);
  [[noreturn]] void fail_not_finite(std::int64_t step, const StepReport& report) const;
  [[noreturn]] void stop_interrupted(std::int64_t done);
  TrainSummary finish(bool evaluated_last, std::int64_t steps_done);
  // Time spent outside training (evaluation, checkpoints) is not counted in train_seconds.
  void pause_timer() { train_seconds_ += train_timer_.seconds(); }

  TrainRun& run_;
  const TrainOptions& o_;
  const RunPlan& plan_;
  std::unique_ptr<RunLog> log_;  // rank 0 only
  TrainSummary summary_;
  std::int64_t last_checkpoint_;  // -1: none yet
  Timer train_timer_;
  double train_seconds_ = 0, window_loss_ = 0, exposed_comm_ = 0;
  // Where the steps' time goes (since the first step; logged cumulative like exposed_comm_s).
  double forward_s_ = 0, backward_s_ = 0, update_s_ = 0;
  double comm_cpu_at_start_;
  std::int64_t window_steps_ = 0, samples_done_ = 0;
  bool stopped_early_ = false;
};

TrainLoop::TrainLoop(TrainRun& run)
    : run_(run),
      o_(run.options),
      plan_(run.plan),
      last_checkpoint_(run.checkpoint_dir.empty() ? -1 : run.plan.start_step) {
  if (run_.rank == 0) {
    log_ = std::make_unique<RunLog>(
        join_path(run_.out.path(), "metrics.jsonl"),
        o_.report_to == ReportTo::kTensorBoard ? join_path(run_.out.path(), "runs") : "");
  }
  const int world = run_.world;
  log_info("training ", run_.data.task.name, ": ", plan_.n, " examples, ",
           plan_.total_steps - plan_.start_step, " steps of ", plan_.per_step, " samples (", world,
           world > 1 ? " ranks × " : " rank × ", plan_.batch, " × ", plan_.accum,
           " accumulation), ", num_threads(), " threads");
  comm_cpu_at_start_ = run_.comm.thread_cpu_seconds();
  train_timer_.reset();
}

TrainSummary TrainLoop::run() {
  if (run_.stopped_early) {  // the checkpoint of an early stop whose model was not yet written
    stopped_early_ = true;
    return finish(true, plan_.start_step);
  }
  bool evaluated_last = false;
  for (std::int64_t step = plan_.start_step; step < plan_.total_steps; ++step) {
    Timer step_timer;
    const std::int64_t first = plan_.start_sample + (step - plan_.start_step) * plan_.per_step;
    const std::int64_t last = std::min(first + plan_.per_step, plan_.total_samples);
    std::vector<MicroBatch> micro = run_.step_batches(first, last);
    const double lr = run_.lr_at(first);
    const StepReport report = run_.step.run(run_.state.params.data(), micro, step, lr,
                                            o_.max_grad_norm, InterruptGuard::requested());
    if (!report.applied) fail_not_finite(step, report);
    add_to_totals(report, last - first);

    const std::int64_t done = step + 1;
    const double epoch = static_cast<double>(last) / static_cast<double>(plan_.n);
    if (run_.rank == 0 && (done % o_.log_every == 0 || done == plan_.total_steps)) {
      log_step(done, epoch, lr, report, step_timer.seconds(), last);
    }
    if (done % o_.log_every == 0) {
      window_loss_ = 0;
      window_steps_ = 0;
    }
    const bool want_eval = wants_eval(done, first, last);
    if (want_eval) {
      pause_timer();
      if (log_) log_->end_progress();
      evaluate(done, epoch);
      train_timer_.reset();
    }
    evaluated_last = want_eval;
    // Every rank saw the same evaluations, so all stop together.
    stopped_early_ = want_eval && run_.best.should_stop() && done < plan_.total_steps;
    const bool want_save = o_.save_every > 0 ? done % o_.save_every == 0 : want_eval;
    const bool interrupted = report.stop && done < plan_.total_steps && !stopped_early_;
    if (want_save || done == plan_.total_steps || stopped_early_ ||
        (interrupted && last_checkpoint_ != done)) {
      pause_timer();
      checkpoint(done, last);
      train_timer_.reset();
    }
    if (stopped_early_) {
      log_info("early stopping at step ", done, ": ", run_.best.evals_without_improvement(),
               " evaluations without improving ", run_.best.key(), " on step ",
               *run_.best.best_step(), "'s ", run_.best.best_value(), " by more than ",
               o_.best.threshold);
      return finish(true, done);
    }
    if (interrupted) stop_interrupted(done);
  }
  return finish(evaluated_last, plan_.total_steps);
}

void TrainLoop::add_to_totals(const StepReport& report, std::int64_t samples) {
  forward_s_ += report.forward_s;
  backward_s_ += report.backward_s;
  update_s_ += report.update_s;
  exposed_comm_ += report.exposed_comm_s;
  samples_done_ += samples;
  window_loss_ += report.loss;
  ++window_steps_;
  summary_.final_loss = report.loss;
}

// A metrics.jsonl record and the progress line (rank 0).
void TrainLoop::log_step(std::int64_t done, double epoch, double lr, const StepReport& report,
                         double step_seconds, std::int64_t last) {
  const double elapsed = train_seconds_ + train_timer_.seconds();
  const double rate = samples_done_ / std::max(elapsed, 1e-9);
  nlohmann::json rec{{"step", done},
                     {"epoch", epoch},
                     {"loss", window_loss_ / window_steps_},
                     {"lr", lr},
                     {"grad_norm", report.grad_norm},
                     {"samples_per_s", rate},
                     {"step_seconds", step_seconds},
                     {"forward_s", forward_s_},
                     {"backward_s", backward_s_},
                     {"update_s", update_s_}};
  if (run_.world > 1) {
    rec["exposed_comm_s"] = exposed_comm_;
    // CPU of this rank's communication threads since the first step (cumulative, like
    // exposed_comm_s): under a CPU quota it comes out of compute.
    rec["comm_cpu_s"] = run_.comm.thread_cpu_seconds() - comm_cpu_at_start_;
  }
  log_->record(rec);
  log_->progress(done, plan_.total_steps, window_loss_ / window_steps_, lr, rate,
                 (plan_.total_samples - last) / std::max(rate, 1e-9));
}

// --eval-every, and always after the last step (when there is a dev split).
bool TrainLoop::wants_eval(std::int64_t done, std::int64_t first, std::int64_t last) const {
  if (run_.data.dev.empty()) return false;
  const EvalEvery& every = o_.eval_every;
  const bool epoch_end = last / plan_.n > first / plan_.n;
  return (every.when == EvalEvery::When::kEpoch && epoch_end) ||
         (every.when == EvalEvery::When::kSteps && done % every.steps == 0) ||
         done == plan_.total_steps;
}

void TrainLoop::evaluate(std::int64_t step, double epoch) {
  bool first = true;
  for (auto& [split, examples] : run_.data.dev) {
    EvalResult r = distributed_eval(run_, examples);  // the same on every rank
    summary_.dev_metrics = r.metrics;
    nlohmann::json rec{
        {"step", step}, {"epoch", epoch}, {"split", split}, {"eval_examples", r.examples}};
    if (!std::isnan(r.loss)) rec["eval_loss"] = r.loss;  // the similarity evaluation has none
    for (auto& [name, value] : r.metrics) rec["eval_" + name] = value;
    const bool best = first && run_.best.offer(step, rec);
    first = false;
    if (run_.rank != 0) continue;
    log_->record(rec);
    log_info("eval ", split, " at step ", step, ": ", rec.dump());
    if (best && o_.load_best_model_at_end) {
      save_best_model(run_.out.path(), run_.state, o_.model_folder(), step);
      run_.out.keep();
    }
  }
}

void TrainLoop::checkpoint(std::int64_t step, std::int64_t samples_seen) {
  if (run_.rank != 0) return;
  nlohmann::json st{{"step", step},
                    {"total_steps", plan_.total_steps},
                    {"samples_seen", samples_seen},
                    {"total_samples", plan_.total_samples},
                    {"samples_per_step", plan_.sched_per_step},
                    {"world", run_.world},
                    {"task", run_.data.task.name},
                    {"best", run_.best.to_json()},
                    {"options", options_to_json(o_)}};
  if (stopped_early_) st["stopped_early"] = true;
  save_checkpoint(run_.out.path(), run_.state, o_.model_folder(), run_.optimizer, st,
                  o_.save_total_limit);
  run_.out.keep();
  last_checkpoint_ = step;
}

void TrainLoop::fail_not_finite(std::int64_t step, const StepReport& report) const {
  throw_error("step ", step + 1, ": the loss is ", report.loss, " and the gradient norm ",
              report.grad_norm, "; training stopped and no model was written. ",
              last_checkpoint_ >= 0
                  ? cat("The last good checkpoint (step ", last_checkpoint_, ") is in ",
                        join_path(run_.out.path(), "checkpoint"), ". ")
                  : std::string(),
              "Lower --lr (now ", o_.lr, ") or check the labels");
}

// Every rank stops after the same step; rank 0 has written a checkpoint at it.
void TrainLoop::stop_interrupted(std::int64_t done) {
  if (log_) log_->end_progress();
  if (run_.world > 1) run_.comm.barrier();  // rank 0's checkpoint is complete before anyone exits
  const int sig = InterruptGuard::signal() != 0 ? InterruptGuard::signal() : SIGINT;
  const std::string checkpoint = join_path(run_.out.path(), "checkpoint");
  throw JobError(
      cat("interrupted at step ", done, " of ", plan_.total_steps, "; the checkpoint is in ",
          checkpoint, ". Continue with the same command and --resume ", checkpoint),
      128 + sig);
}

// The final model and record (rank 0), and the summary every rank returns. With
// --load-best-model-at-end the model saved is the best evaluation's and the final record's
// eval_* values are its.
TrainSummary TrainLoop::finish(bool evaluated_last, std::int64_t steps_done) {
  pause_timer();
  if (log_) log_->end_progress();
  if (!evaluated_last && !run_.data.dev.empty() && plan_.start_step == plan_.total_steps) {
    evaluate(plan_.total_steps,
             static_cast<double>(plan_.total_samples) / static_cast<double>(plan_.n));
  }
  const BestTracker& best = run_.best;
  const bool load_best = o_.load_best_model_at_end && best.best_step().has_value();
  if (load_best) {
    summary_.dev_metrics.clear();
    for (auto& [key, value] : best.best_record().items()) {
      if (key.rfind("eval_", 0) == 0 && key != "eval_loss" && key != "eval_examples") {
        summary_.dev_metrics.emplace_back(key.substr(5),
                                          value.is_number() ? value.get<double>() : std::nan(""));
      }
    }
  }
  if (run_.rank == 0) {
    if (load_best && *best.best_step() != steps_done) {
      log_info("loading the best model (step ", *best.best_step(), ", ", best.key(), " ",
               best.best_value(), ") from ", join_path(run_.out.path(), "best"));
      load_best_params(run_.out.path(), *best.best_step(), run_.state);
    }
    save_model(run_.out.path(), run_.state, o_.model_folder());
  }
  summary_.steps = steps_done;
  summary_.best_step = best.best_step();
  summary_.stopped_early = stopped_early_;
  summary_.seconds = train_seconds_;
  summary_.samples_per_second = samples_done_ / std::max(train_seconds_, 1e-9);
  if (run_.rank == 0) {
    nlohmann::json final_rec{{"final", true},
                             {"steps", steps_done},
                             {"world", run_.world},
                             {"train_seconds", train_seconds_},
                             {"train_samples_per_s", summary_.samples_per_second}};
    if (plan_.total_steps > plan_.start_step) final_rec["loss"] = summary_.final_loss;
    if (run_.world > 1) final_rec["exposed_comm_s"] = exposed_comm_;
    for (auto& [name, value] : summary_.dev_metrics) final_rec["eval_" + name] = value;
    if (best.best_step()) {
      final_rec["best_step"] = *best.best_step();
      final_rec["best_metric"] = best.key();
      final_rec["best_value"] = best.best_value();
      final_rec["model"] = load_best ? "best" : "last";
    }
    if (stopped_early_) final_rec["stopped_early"] = true;
    log_->record(final_rec);
    log_.reset();
    run_.out.commit();
  }
  if (run_.world > 1) run_.comm.barrier();
  summary_.rank = run_.rank;
  return summary_;
}

TrainSummary train_with(TrainRun& run) {
  run.start();
  if (run.already_finished) {
    const std::int64_t steps = std::min(run.plan.start_step, run.plan.total_steps);
    log_info("the run in ", run.out.path(), " already finished at step ", steps,
             run.stopped_early ? " (stopped early)" : "", "; nothing to do");
    TrainSummary done;
    done.steps = steps;
    done.already_finished = true;
    done.rank = run.rank;
    return done;
  }
  return TrainLoop(run).run();
}

}  // namespace

TrainSummary run_training(const TrainOptions& options) {
  validate_train_options(options);
  std::unique_ptr<Communicator> comm =
      make_communicator({.timeout_seconds = options.dist.comm_timeout,
                         .poll_interval_us = options.dist.comm_poll_us});
  const InterruptGuard interrupts;  // Ctrl-C / SIGTERM stop at a step boundary
  // The set-up has no collective: every rank gets to the vote, which ends the job on every rank
  // (MPI finalised, no abort banner) if any failed, reported once when all failed alike.
  std::unique_ptr<TrainRun> run;
  std::string error, identity;
  try {
    identity = set_up_process(options, *comm);
    run = std::make_unique<TrainRun>(options, *comm);
  } catch (const Error& e) {
    error = e.what();
  }
  agree_on_setup(*comm, error);
  if (!identity.empty()) log_line("info", identity);
  try {
    return train_with(*run);
  } catch (const JobError&) {
    throw;  // every rank raised it at the same point: each exits, rank 0 reports
  } catch (const Error& e) {
    // One rank failing must end the whole job at once, not leave the others waiting for it
    // until --comm-timeout.
    if (comm->world() > 1) comm->abort(cat("rank ", comm->rank(), ": ", e.what()), 1);
    throw;
  }
}

}  // namespace bertfit
