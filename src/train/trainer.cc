// The training loop behind `bertfit train`.
//
// Data order: the examples form one stream, epoch after epoch, each epoch in the order
// epoch_order(n, seed, epoch, shuffle); sample g of the run is row order_{g / n}[g % n]. Step s
// takes samples [s·S, (s+1)·S) with S = batch size × accumulation steps, cut into micro-batches
// of the batch size; the run ends after epochs·n samples (or max-steps steps). Without shuffle,
// step s of batch size b therefore uses rows [s·b mod n, ...). The stream depends only on the
// seed, so the data position of a checkpoint is just its step.
#include "train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "base/parallel.h"
#include "base/timer.h"
#include "data/batch.h"
#include "data/shuffle.h"
#include "model/bert.h"
#include "model/model_io.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint.h"
#include "train/dataset.h"
#include "train/evaluate.h"
#include "train/optimizer.h"

namespace bertfit {
namespace {

// The run's sample stream (see the file comment).
class SampleStream {
 public:
  SampleStream(std::int64_t n, std::uint64_t seed, bool shuffle)
      : n_(n), seed_(seed), shuffle_(shuffle) {}
  std::int64_t row(std::int64_t g) {
    std::int64_t epoch = g / n_;
    auto it = orders_.find(epoch);
    if (it == orders_.end()) {
      if (orders_.size() > 2) orders_.erase(orders_.begin());
      it = orders_.emplace(epoch, epoch_order(n_, seed_, epoch, shuffle_)).first;
    }
    return it->second[g % n_];
  }

 private:
  std::int64_t n_;
  std::uint64_t seed_;
  bool shuffle_;
  std::map<std::int64_t, std::vector<std::int64_t>> orders_;
};

// metrics.jsonl (appended, flushed per record) and the human-readable progress on stderr.
class RunLog {
 public:
  explicit RunLog(const std::string& path) : file_(std::fopen(path.c_str(), "a")) {
    if (file_ == nullptr) throw_error(path, ": cannot open for appending");
    tty_ = ::isatty(2) != 0;
  }
  ~RunLog() {
    if (file_ != nullptr) std::fclose(file_);
  }
  void record(const nlohmann::json& j) {
    std::string line = j.dump() + "\n";
    std::fputs(line.c_str(), file_);
    std::fflush(file_);
  }
  void progress(std::int64_t step, std::int64_t total, double loss, double lr, double rate,
                double eta) {
    std::fprintf(stderr, "%sstep %lld/%lld  loss %.4f  lr %.3g  %.1f samples/s  ETA %s%s",
                 tty_ ? "\r" : "", static_cast<long long>(step), static_cast<long long>(total),
                 loss, lr, rate, format_seconds(eta).c_str(), tty_ ? "   " : "\n");
    std::fflush(stderr);
  }
  void end_progress() {
    if (tty_) std::fputc('\n', stderr);
  }
  static std::string format_seconds(double s) {
    if (!std::isfinite(s) || s < 0) return "?";
    long t = std::lround(s);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    return buf;
  }

 private:
  std::FILE* file_;
  bool tty_ = false;
};

std::int64_t eval_interval(const TrainOptions& o) {
  if (o.eval_every == "epoch" || o.eval_every == "never") return 0;
  return std::stoll(o.eval_every);
}

}  // namespace

TrainSummary run_training(const TrainOptions& options) {
  TrainOptions o = options;
  validate_train_options(o);
  if (o.threads > 0) set_num_threads(o.threads);
  const DataOptions& d = o.data;

  // Everything that can fail on user input happens before the output folder is touched.
  std::string checkpoint_dir = o.resume.empty() ? "" : find_checkpoint(o.resume);
  ModelState state = load_model(checkpoint_dir.empty() ? o.model_dir : checkpoint_dir);
  WordPieceTokenizer tokenizer = WordPieceTokenizer::from_model_dir(o.model_dir);
  check_tokenizer_fits(tokenizer, state.config, o.model_dir);
  if (o.max_seq_len > state.config.max_positions) {
    throw_error("--max-seq-len ", o.max_seq_len, " exceeds the model's max_position_embeddings (",
                state.config.max_positions, ") in ", o.model_dir);
  }
  LoadedExamples train = load_train_examples(d, std::nullopt);
  TaskInfo task =
      !d.task.empty() ? glue_task_info(d.task) : custom_task_info(d.regression, train.label_names);
  const int needed = task.regression ? 1 : static_cast<int>(task.label_names.size());
  if (state.config.num_labels != needed) {
    throw_error(o.model_dir, ": the model has num_labels = ", state.config.num_labels, " but ",
                task.name, " needs ", needed, "; make one with `bertfit init --num-labels ", needed,
                "` or use a checkpoint trained for this task");
  }
  if (!task.regression) state.config.id2label = task.label_names;
  state.config.problem_type = task.regression ? "regression" : "single_label_classification";
  if (train.skipped_rows > 0)
    log_warn(train.path, ": skipped ", train.skipped_rows, " malformed rows");
  std::vector<std::pair<std::string, LoadedExamples>> dev_sets;
  if (o.eval_every != "never" && (!d.task.empty() || !d.dev_file.empty())) {
    for (const std::string& split : task.eval_splits) {
      dev_sets.emplace_back(split, load_eval_examples(d, split, task));
    }
  }
  std::vector<EncodedExample> train_enc = encode_examples(tokenizer, train.examples, o.max_seq_len);
  std::vector<std::pair<std::string, std::vector<EncodedExample>>> dev_enc;
  for (auto& [split, loaded] : dev_sets) {
    dev_enc.emplace_back(split, encode_examples(tokenizer, loaded.examples, o.max_seq_len));
  }
  make_directories(o.output_dir);

  const ModelConfig& config = state.config;
  BertModel model(config, state.layout);
  AdamW optimizer(state.layout, {.weight_decay = o.weight_decay});
  std::int64_t start_step = 0;
  if (!checkpoint_dir.empty()) {
    nlohmann::json saved = load_checkpoint_state(checkpoint_dir, optimizer);
    check_resume_compatible(o, saved.value("options", nlohmann::json::object()));
    start_step = saved["step"].get<std::int64_t>();
    log_info("resuming from ", checkpoint_dir, " at step ", start_step);
  }

  const std::int64_t n = static_cast<std::int64_t>(train_enc.size());
  const std::int64_t per_step = std::int64_t{o.batch_size} * o.grad_accum;
  const std::int64_t total_samples =
      o.max_steps > 0 ? o.max_steps * per_step
                      : static_cast<std::int64_t>(std::ceil(o.epochs * static_cast<double>(n)));
  const std::int64_t total_steps =
      o.max_steps > 0 ? o.max_steps : (total_samples + per_step - 1) / per_step;
  const std::int64_t warmup =
      o.warmup_steps > 0 ? o.warmup_steps
                         : static_cast<std::int64_t>(std::ceil(o.warmup_ratio * total_steps));
  const std::int64_t every = eval_interval(o);
  SampleStream stream(n, static_cast<std::uint64_t>(o.seed), !o.no_shuffle);
  BatchOptions batch_options;
  batch_options.pad_to_multiple_of = o.pad_to_multiple_of;
  batch_options.max_len = config.max_positions;
  AlignedBuffer<float> grads(state.layout.total());
  Activations acts;
  RunLog run_log(join_path(o.output_dir, "metrics.jsonl"));
  log_info("training ", task.name, ": ", n, " examples, ", total_steps, " steps of ", per_step,
           " samples, ", num_threads(), " threads");

  TrainSummary summary;
  auto run_eval = [&](std::int64_t step, double epoch) {
    for (auto& [split, enc] : dev_enc) {
      EvalResult r =
          evaluate(model, state.params.data(), enc, task, o.batch_size, o.pad_to_multiple_of);
      nlohmann::json rec{{"step", step},
                         {"epoch", epoch},
                         {"split", split},
                         {"eval_loss", r.loss},
                         {"eval_examples", r.examples}};
      for (auto& [name, value] : r.metrics) rec["eval_" + name] = value;
      run_log.record(rec);
      log_info("eval ", split, " at step ", step, ": ", rec.dump());
      summary.dev_metrics = r.metrics;
    }
  };
  auto checkpoint = [&](std::int64_t step) {
    nlohmann::json st{{"step", step},
                      {"total_steps", total_steps},
                      {"samples_seen", std::min(step * per_step, total_samples)},
                      {"task", task.name},
                      {"options", options_to_json(o)}};
    save_checkpoint(o.output_dir, state, o.model_dir, optimizer, st);
  };

  Timer train_timer;
  double train_seconds = 0, window_loss = 0;
  std::int64_t window_steps = 0, samples_done = 0;
  bool evaluated_last = false;
  for (std::int64_t step = start_step; step < total_steps; ++step) {
    const std::int64_t first = step * per_step;
    const std::int64_t last = std::min(first + per_step, total_samples);
    grads.zero();
    double step_loss = 0;
    std::int64_t micro = 0;
    for (std::int64_t g = first; g < last; g += o.batch_size, ++micro) {
      const std::int64_t count = std::min<std::int64_t>(o.batch_size, last - g);
      std::vector<std::int64_t> rows(count);
      for (std::int64_t i = 0; i < count; ++i) rows[i] = stream.row(g + i);
      Batch batch = make_batch(train_enc, rows, batch_options);
      ModelInput in{batch.B, batch.T, batch.input_ids.data(), batch.token_type_ids.data(),
                    batch.attention_mask.data()};
      DropoutState dropout{.train = true,
                           .seed = static_cast<std::uint64_t>(o.seed),
                           .step = static_cast<std::uint64_t>(step),
                           .micro = static_cast<std::uint64_t>(micro)};
      // Each micro-batch's mean loss weighted by its share of the step: the gradient is the
      // mean over all samples of the step.
      const float share = static_cast<float>(count) / static_cast<float>(last - first);
      model.forward(state.params.data(), in, dropout, acts);
      step_loss += share * model.loss(batch.labels.data(), share, acts);
      model.backward(state.params.data(), grads.data(), in, dropout, acts);
    }
    const double norm = clip_grad_norm(grads.data(), state.layout.total(), o.max_grad_norm);
    const double lr = linear_schedule_lr(o.lr, step, warmup, total_steps);
    optimizer.step(state.params.data(), grads.data(), lr);
    samples_done += last - first;
    window_loss += step_loss;
    ++window_steps;
    summary.final_loss = step_loss;
    evaluated_last = false;

    const std::int64_t done = step + 1;
    const double epoch = static_cast<double>(last) / static_cast<double>(n);
    if (done % o.log_every == 0 || done == total_steps) {
      double elapsed = train_seconds + train_timer.seconds();
      double rate = samples_done / std::max(elapsed, 1e-9);
      run_log.record({{"step", done},
                      {"epoch", epoch},
                      {"loss", window_loss / window_steps},
                      {"lr", lr},
                      {"grad_norm", norm},
                      {"samples_per_s", rate}});
      run_log.progress(done, total_steps, window_loss / window_steps, lr, rate,
                       (total_samples - last) / std::max(rate, 1e-9));
      window_loss = 0;
      window_steps = 0;
    }
    const bool epoch_end = last / n > first / n;
    const bool want_eval =
        !dev_enc.empty() && ((o.eval_every == "epoch" && epoch_end) ||
                             (every > 0 && done % every == 0) || done == total_steps);
    if (want_eval) {
      train_seconds += train_timer.seconds();
      run_log.end_progress();
      run_eval(done, epoch);
      evaluated_last = true;
      train_timer.reset();
    }
    const bool want_save = o.save_every > 0 ? done % o.save_every == 0 : want_eval;
    if (want_save || done == total_steps) {
      train_seconds += train_timer.seconds();
      checkpoint(done);
      train_timer.reset();
    }
  }
  train_seconds += train_timer.seconds();
  run_log.end_progress();
  if (!evaluated_last && !dev_enc.empty() && start_step == total_steps) {
    run_eval(total_steps, static_cast<double>(total_samples) / static_cast<double>(n));
  }
  save_model(o.output_dir, state, o.model_dir);

  summary.steps = total_steps - start_step;
  summary.seconds = train_seconds;
  summary.samples_per_second = samples_done / std::max(train_seconds, 1e-9);
  nlohmann::json final_rec{{"final", true},
                           {"steps", total_steps},
                           {"train_seconds", train_seconds},
                           {"train_samples_per_s", summary.samples_per_second},
                           {"loss", summary.final_loss}};
  for (auto& [name, value] : summary.dev_metrics) final_rec["eval_" + name] = value;
  run_log.record(final_rec);
  return summary;
}

}  // namespace bertfit
