// `bertfit bench train|infer`: throughput of training steps or inference passes on random
// batches, with achieved GFLOP/s and the fraction of this machine's matrix-product peak,
// measured in the same command (a 4096×768×3072 fp32 product, the FFN's shape at batch 32,
// seq 128). Prints one JSON object, with the OpenMP variables and the allocator it ran under.
// `bertfit bench scaling` predicts data-parallel scaling instead (cmd_bench_scaling.cc).
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "apps/bertfit/bench_scaling.h"
#include "apps/bertfit/cli_flags.h"
#include "apps/bertfit/commands.h"
#include "apps/bertfit/model_source.h"
#include "base/dtype.h"
#include "base/error.h"
#include "base/parallel.h"
#include "base/timer.h"
#include "flags/groups.h"
#include "gemm/gemm.h"
#include "model/bert.h"
#include "model/flops.h"
#include "model/head.h"
#include "model/init.h"
#include "model/model_io.h"
#include "train/optimizer.h"
#include "train/options.h"
#include "train/pair_objective.h"
#include "train/step.h"

namespace bertfit::cli {
namespace {

enum class BenchMode { kTrain, kInfer, kScaling };

struct BenchOptions {
  std::optional<BenchMode> mode;  // required: set by the command line
  const ModelFamily* arch = &default_family();
  std::string model_dir, revision = "main";
  ComputeOptions compute;  // --precision, --threads, --batch-size
  int seq_len = 128, steps = 5, warmup = 2;
  double seconds = 0;        // time steps until this long (at least `steps`); 0: `steps` only
  bool no_peak = false;      // skip the matrix-product peak (2 x ~1 s of large products)
  std::string start_file;    // after warm-up, wait until this file exists (tune's instances)
  std::string tuned_config;  // --config: applied by main before parsing (tuned_config.h)
  BenchScalingOptions scaling;
};

// Waits until `path` exists, announcing it once on stderr ("bench: ready"): several processes
// start their timed steps together when tune creates the file.
void wait_for_start_file(const std::string& path) {
  std::fprintf(stderr, "bench: ready\n");
  std::fflush(stderr);
  while (access(path.c_str(), F_OK) != 0) usleep(1000);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Best-of-several GFLOP/s of one large product through gemm/ in the given precision, by the
// fastest path gemm/ has for it: a prepared weight (as the model's inference products; fp32
// training reads its weights plain).
double measure_matmul_peak(Precision precision) {
  const std::int64_t M = 4096, K = 768, N = 3072;
  AlignedBuffer<float> x(M * K), w(N * K), y(M * N);
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> u(-1, 1);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = u(rng);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = u(rng);
  AlignedBuffer<std::uint16_t> xb(M * K);
  for (std::size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
  PreparedWeightBf16 wb;
  PreparedWeightInt8 wi;
  PreparedWeightF32 wf;
  if (precision == Precision::kF32) wf.prepare(w.data(), N, K);
  if (precision == Precision::kBF16) wb.prepare(w.data(), N, K, /*with_backward=*/false);
  if (precision == Precision::kInt8) wi.prepare(w.data(), N, K);
  double best = 0;
  for (int r = 0; r < 6; ++r) {
    Timer t;
    if (precision == Precision::kBF16) {
      linear_forward_bf16(y.data(), xb.data(), wb, nullptr, M);
    } else if (precision == Precision::kInt8) {
      linear_forward_int8(y.data(), x.data(), wi, nullptr, M);  // its quantization included
    } else {
      linear_forward(y.data(), x.data(), wf, nullptr, M);
    }
    best = std::max(best, 2.0 * M * K * N / t.seconds() / 1e9);
  }
  return best;
}

// What the process runs under, for `bertfit tune` and --config to check: the OpenMP variables
// it sees, the binding libgomp took from them, and the allocator mapped into it (a preloaded
// tcmalloc or jemalloc, else glibc's).
nlohmann::json omp_environment() {
  nlohmann::json j = nlohmann::json::object();
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string var = *e;
    const std::size_t eq = var.find('=');
    if (var.rfind("OMP_", 0) == 0 || var.rfind("GOMP_", 0) == 0) {
      j[var.substr(0, eq)] = var.substr(eq + 1);
    }
  }
  return j;
}

std::string mapped_allocator() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("libtcmalloc") != std::string::npos) return "tcmalloc";
    if (line.find("libjemalloc") != std::string::npos) return "jemalloc";
  }
  return "glibc";
}

void run(const BenchOptions& o) {
  if (o.mode == BenchMode::kScaling) {
    run_bench_scaling(o.scaling, *o.arch, o.model_dir, o.revision);
    return;
  }
  const bool train = o.mode == BenchMode::kTrain;
  const Precision precision = runnable_precision(o.compute.precision);
  if (train && precision == Precision::kInt8) {
    throw_error("--precision int8 is for inference: bench infer, not bench train");
  }
  if (o.compute.batch_size <= 0 || o.seq_len <= 1 || o.steps <= 0 || o.seconds < 0) {
    throw_error("--batch-size, --seq-len and --steps must be positive, --seconds not negative");
  }
  if (o.compute.threads > 0) set_num_threads(o.compute.threads);
  ModelState state;
  if (!o.model_dir.empty()) {
    // A model without a trained head (a base model, another task's) is measured with a new one,
    // as train would start it: the head's values do not change the work.
    state = load_model(resolve_model_flag(o.model_dir, o.revision));
  } else {
    state = ModelState(ModelConfig::defaults(*o.arch));
    init_params(state.layout, state.config, 42, state.params.data());
  }
  const ModelConfig& c = state.config;
  // A head without a per-example loss (a sentence embedder) trains as `train` trains it: the
  // batch's B sequences as B/2 (anchor, positive) pairs under MultipleNegativesRankingLoss.
  const bool pairs = model_head(c).label_count(c, 1, 1) == 0;
  if (train && pairs && o.compute.batch_size % 2 != 0) {
    throw_error("--batch-size ", o.compute.batch_size, ": a ", head_kind_noun(c.head),
                " trains on pairs of texts; give an even number of sequences");
  }
  if (o.seq_len > c.max_tokens()) {
    throw_error("--seq-len ", o.seq_len, " exceeds the model's ", c.max_tokens(), " positions");
  }
  const int B = o.compute.batch_size, T = o.seq_len;
  // One random batch of B full-length sequences (ids from 1000 on: past the special tokens).
  std::mt19937 rng(0);
  std::vector<MicroBatch> micro(1);
  Batch& batch = micro[0].batch.emplace();
  micro[0].share = 1.0f;
  batch.B = B;
  batch.T = T;
  batch.input_ids.resize(std::size_t(B) * T);
  batch.token_type_ids.assign(std::size_t(B) * T, 0);
  batch.attention_mask.assign(std::size_t(B) * T, 1);
  for (auto& id : batch.input_ids)
    id = 1000 + static_cast<std::int32_t>(rng() % (c.vocab_size - 1000));
  for (int b = 0; b < B; ++b) batch.input_ids[std::size_t(b) * T] = 101;
  const bool multi = c.problem() == ProblemType::kMultiLabel;
  batch.labels.resize(model_head(c).label_count(c, B, T));  // a tag per token, or per sequence
  for (auto& label : batch.labels) {
    label = c.is_regression() ? 0.5f : static_cast<float>(rng() % (multi ? 2 : c.num_labels));
  }
  BertModel model(c, state.layout, precision);
  // The step `train` runs (train/step.h) with train's default learning rate and clipping.
  const TrainOptions defaults;
  AdamW opt(state.layout, {.weight_decay = defaults.weight_decay});
  std::optional<TrainStep> train_step;
  if (train) train_step.emplace(model, opt, nullptr, 1);
  if (train && pairs) {
    train_step->use_objective(std::make_unique<PairObjective>(
        PairLoss::kMultipleNegativesRanking, defaults.embedding.loss_scale, 2,
        model_head(c).output_width(c), nullptr));
  }
  Activations infer_acts;
  const ModelInput in{B, T, batch.input_ids.data(), batch.token_type_ids.data(),
                      batch.attention_mask.data()};
  std::vector<double> times;
  // The peak is measured before and after the steps and the better kept: on a shared machine
  // a single measurement can land in a busy moment.
  const double peak_before = o.no_peak ? 0 : measure_matmul_peak(precision);
  // Inference serves fixed weights: prepared once, before the timed forwards.
  ModelWeights infer_weights = model.make_weights();
  if (!train_step) infer_weights.prepare(state.params.data(), /*with_backward=*/false);
  auto step_once = [&](int s) {
    if (train_step) {
      train_step->run(state.params.data(), micro, s, defaults.lr, defaults.max_grad_norm);
    } else {
      model.forward(infer_weights, in, DropoutState{}, infer_acts);
    }
  };
  for (int s = 0; s < o.warmup; ++s) step_once(s);
  if (!o.start_file.empty()) wait_for_start_file(o.start_file);
  const Timer window;
  for (int s = o.warmup; s < o.warmup + o.steps || window.seconds() < o.seconds; ++s) {
    Timer t;
    step_once(s);
    times.push_back(t.seconds());
  }
  const double timed_seconds = window.seconds();
  const double step = median(times);
  // Executed products (the last layer runs on the first tokens only), and the full model's
  // (every token of every layer, as the peer computes them).
  const double flops = train ? train_step_flops(c, B, T) : forward_flops(c, B, T);
  const double full_flops =
      train ? train_step_flops(c, B, T, false) : forward_flops(c, B, T, false, true);
  // Peak RSS of the steps, read before the second peak measurement allocates its matrices.
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const double peak = o.no_peak ? 0 : std::max(peak_before, measure_matmul_peak(precision));
  nlohmann::json j{{"engine", "bertfit"},
                   {"mode", train ? "train" : "infer"},
                   {"arch", c.model_type()},
                   {"precision", precision_name(precision)},
                   {"threads", num_threads()},
                   {"batch_size", B},
                   {"seq_len", T},
                   {"steps", static_cast<int>(times.size())},
                   {"seconds", timed_seconds},
                   {"ms_per_step", step * 1e3},
                   {"ms_per_step_min", *std::min_element(times.begin(), times.end()) * 1e3},
                   {"samples_per_s", B / step},
                   {"mean_samples_per_s", B * times.size() / timed_seconds},
                   {"gflop_per_step", flops / 1e9},
                   {"full_model_gflop_per_step", full_flops / 1e9},
                   {"gflops", flops / step / 1e9},
                   {"peak_rss_mb", ru.ru_maxrss / 1024.0},
                   {"omp_env", omp_environment()},
                   {"omp_proc_bind", omp_binding()},
                   {"allocator", mapped_allocator()}};
  if (!o.no_peak) {
    j["matmul_peak_gflops"] = peak;
    j["fraction_of_peak"] = flops / step / 1e9 / peak;
  }
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Measure training-step or inference throughput on random batches; prints JSON "
      "with samples/s, ms per step, GFLOP/s and the fraction of the matrix-product "
      "peak measured in the same run. `bench scaling` predicts data-parallel step time and "
      "speedup on N nodes from a measured step, the gradient's bytes and the link.");
  add_flags(*cmd,
            {{"mode",
              "What to measure: train (optimizer steps) or infer (forward passes); scaling: "
              "predict N-node data-parallel steps (--compute-s, --nodes, --link-gbit, ...)",
              choice_target(o->mode, {{"train", BenchMode::kTrain},
                                      {"infer", BenchMode::kInfer},
                                      {"scaling", BenchMode::kScaling}})},
             {"--arch",
              "Architecture (model_type) at its base size (distilbert: distilbert-base, bert: "
              "bert-base), when no --model",
              family_target(o->arch)}});
  add_flags(*cmd, model_flags(o->model_dir, o->revision));
  add_flags(*cmd,
            select_flags(compute_flags(o->compute), {"--batch-size", "--precision", "--threads"}));
  add_flags(*cmd, tuned_config_flags(o->tuned_config));
  add_flags(*cmd, {{"--seq-len", "Tokens per sequence (every sequence full)", &o->seq_len},
                   {"--steps", "Timed steps (median reported)", &o->steps},
                   {"--warmup", "Untimed warm-up steps", &o->warmup}});
  add_flags(*cmd, {{"--seconds",
                    "Time steps until this many seconds passed (at least --steps); 0: --steps only",
                    &o->seconds},
                   {"--no-peak", "Skip measuring the matrix-product peak (no matmul_peak_gflops)",
                    &o->no_peak},
                   {"--start-file",
                    "After warm-up, print `bench: ready` on stderr and wait until this file exists "
                    "(starts several processes' timed steps together: bertfit tune)",
                    &o->start_file}});
  add_flags(*cmd, bench_scaling_flags(o->scaling));
  cmd->get_option("mode")->required();
  cmd->callback([o] { run(*o); });
}

}  // namespace bertfit::cli
