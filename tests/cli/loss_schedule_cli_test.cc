// `bertfit train --lr-scheduler-type`, `--label-smoothing-factor` and `--class-weights` through
// the binary: the learning rate logged at every step is transformers' formula; label smoothing
// reaches the loss (which is linear in the factor); class weights are logged, split over
// micro-batches without changing the step (batch 2b equals 2 micro-batches of b), and refused
// where they mean nothing; every user error is one line naming the flag, with no output left.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "io/safetensors.h"

namespace bertfit::testing {
namespace {

namespace fs = std::filesystem;

std::string mrpc() { return shared_dir() + "/data/glue/MRPC"; }

// A tiny DistilBERT without dropout (runs split differently then draw no different masks).
void init_model(const std::string& dir, int num_labels = 2) {
  RunResult r = run_bertfit("init --arch distilbert --output " + dir +
                            " --set n_layers=2 --set dim=32 --set hidden_dim=64 --set n_heads=2"
                            " --set dropout=0 --set attention_dropout=0"
                            " --set seq_classif_dropout=0 --seed 3 --num-labels " +
                            std::to_string(num_labels));
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

std::string train_mrpc(const std::string& model, const std::string& out, const std::string& extra) {
  return "train --model " + model + " --output " + out + " --task mrpc --data " + mrpc() +
         " --max-seq-len 32 --eval-every never --log-every 1 " + extra;
}

// The step records of OUTPUT/metrics.jsonl, in order.
std::vector<nlohmann::json> step_records(const std::string& out) {
  std::vector<nlohmann::json> records;
  std::istringstream in(read_text(out + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("lr") && !j.contains("final")) records.push_back(j);
  }
  return records;
}

// A failing exit, one error line on stderr naming `flag` (a warning about a new head may come
// before it) and no output folder.
void expect_refused(const RunResult& r, const std::string& out, const std::string& flag) {
  EXPECT_NE(r.exit_code, 0) << r.err;
  const std::string error = "bertfit: error: ";
  const std::size_t at = r.err.find(error);
  ASSERT_NE(at, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(error, at + 1), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n', at), r.err.size() - 1) << r.err;  // the error is the last line
  EXPECT_NE(r.err.find(flag, at), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out)) << out;
}

TEST(ScheduleCli, CosineLearningRateOfEveryStepIsTransformers) {
  TempDir tmp;
  init_model(tmp / "model");
  const int steps = 7, warmup = 2;
  const double lr = 1e-3;
  RunResult r = run_bertfit(train_mrpc(tmp / "model", tmp / "out",
                                       "--batch-size 4 --max-steps 7 --warmup-steps 2 --lr 1e-3 "
                                       "--lr-scheduler-type cosine"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<nlohmann::json> records = step_records(tmp / "out");
  ASSERT_EQ(records.size(), static_cast<std::size_t>(steps));
  for (int k = 0; k < steps; ++k) {
    // get_cosine_schedule_with_warmup (num_cycles 0.5) at step k, the lr step k + 1 logs.
    const double progress = static_cast<double>(k - warmup) / (steps - warmup);
    const double want =
        k < warmup ? lr * k / warmup
                   : lr * std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
    EXPECT_EQ(records[k]["step"], k + 1);
    // The same double formula; a few roundings apart at most.
    EXPECT_NEAR(records[k]["lr"].get<double>(), want, 1e-15 * lr) << "step " << k;
  }
  // The default stays linear: its lr at step 4 is 3/5 of the peak, cosine's 0.5·(1 + cos(0.4π)).
  RunResult l = run_bertfit(train_mrpc(tmp / "model", tmp / "linear",
                                       "--batch-size 4 --max-steps 7 --warmup-steps 2 --lr 1e-3"));
  ASSERT_EQ(l.exit_code, 0) << l.err;
  EXPECT_NEAR(step_records(tmp / "linear")[4]["lr"].get<double>(), 0.6e-3, 1e-18);
}

TEST(ScheduleCli, UnknownTypeAndPolynomialBelowItsEndAreRefused) {
  TempDir tmp;
  init_model(tmp / "model");
  RunResult r = run_bertfit(
      train_mrpc(tmp / "model", tmp / "out", "--max-steps 1 --lr-scheduler-type cosine_annealing"));
  expect_refused(r, tmp / "out", "--lr-scheduler-type");
  EXPECT_NE(r.err.find("'cosine_annealing' is not linear, cosine, cosine_with_restarts"),
            std::string::npos)
      << r.err;
  r = run_bertfit(train_mrpc(tmp / "model", tmp / "out",
                             "--max-steps 1 --lr-scheduler-type polynomial --lr 1e-8"));
  expect_refused(r, tmp / "out", "--lr-scheduler-type polynomial");
}

// With lr 0 the parameters never move, so each run's first logged loss is the loss of the same
// logits: smoothing by eps gives (1 - eps)·nll + eps·(mean over classes of -log p), linear in
// eps, so loss(0.3) = 0.7·loss(0) + 0.3·loss(1). The losses are double sums of float logits'
// terms: equal to ~1e-7 relative.
TEST(LossCli, LabelSmoothingReachesTheLoss) {
  TempDir tmp;
  init_model(tmp / "model");
  auto first_loss = [&](const std::string& name, const std::string& eps) {
    RunResult r = run_bertfit(train_mrpc(tmp / "model", tmp / name,
                                         "--batch-size 16 --max-steps 1 --lr 0 "
                                         "--label-smoothing-factor " +
                                             eps));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return step_records(tmp / name).at(0)["loss"].get<double>();
  };
  const double l0 = first_loss("e0", "0"), l1 = first_loss("e1", "1"), l3 = first_loss("e3", "0.3");
  EXPECT_GT(std::fabs(l1 - l0), 1e-3);  // the two ends differ: the comparison means something
  EXPECT_NEAR(l3, 0.7 * l0 + 0.3 * l1, 1e-6 * l3);
}

// A regression file, a multi-label file and a file whose class 2 has no examples.
std::string ids_file(const TempDir& tmp) {
  write_text(tmp / "ids.tsv", "text\tlabel\na b\t0\nc d\t1\ne f\t0\ng h\t1\n");
  return " --train-file " + (tmp / "ids.tsv") +
         " --text-a-column text --label-column label --max-steps 1 --max-seq-len 16"
         " --eval-every never --ignore-mismatched-sizes";
}

TEST(LossCli, SmoothingAndWeightsAreRefusedWhereTheyMeanNothing) {
  TempDir tmp;
  init_model(tmp / "model");
  const std::string base = "train --model " + (tmp / "model") + " --output " + (tmp / "out");
  for (const char* problem : {"regression", "multi_label_classification"}) {
    for (const char* flag : {"--label-smoothing-factor 0.1", "--class-weights balanced"}) {
      SCOPED_TRACE(std::string(problem) + " " + flag);
      RunResult r = run_bertfit(base + ids_file(tmp) + " --problem-type " + problem + " " + flag);
      const std::string name = std::string(flag).substr(0, std::string(flag).find(' '));
      expect_refused(r, tmp / "out", name + " applies to single-label classification only");
    }
  }
  for (const char* bad : {"1.5", "-0.1", "nan"}) {
    RunResult r = run_bertfit(base + ids_file(tmp) + " --label-smoothing-factor " + bad);
    expect_refused(r, tmp / "out", "--label-smoothing-factor");
  }
}

TEST(LossCli, ClassWeightsAreCheckedAndLogged) {
  TempDir tmp;
  init_model(tmp / "model");
  const std::string base = "train --model " + (tmp / "model") + " --output " + (tmp / "out");
  // Not K = 2 weights; not positive finite numbers; a class without examples.
  RunResult r = run_bertfit(base + ids_file(tmp) + " --class-weights 1,2,3");
  expect_refused(r, tmp / "out", "--class-weights gives 3 weights but the model has K = 2 labels");
  for (const char* bad : {"1,-2", "1,0", "1,inf", "1,,2", "1,x", "heavy"}) {
    r = run_bertfit(base + ids_file(tmp) + " --class-weights " + bad);
    expect_refused(r, tmp / "out", "--class-weights");
    EXPECT_NE(r.err.find("one finite positive weight per label"), std::string::npos) << r.err;
  }
  r = run_bertfit(base + ids_file(tmp) + " --num-labels 3 --class-weights balanced");
  expect_refused(r, tmp / "out",
                 "--class-weights balanced: class 'LABEL_2' (id 2) has no training examples");

  // balanced on MRPC: n / (2 · count) from the training file's labels, in the info line.
  std::istringstream in(read_text(mrpc() + "/train.tsv"));
  std::string line;
  std::getline(in, line);  // header
  double count[2] = {0, 0};
  while (std::getline(in, line)) ++count[line[0] - '0'];
  const double n = count[0] + count[1];
  std::ostringstream want;
  want << "class weights (balanced): '0' " << n / (2 * count[0]) << ", '1' " << n / (2 * count[1]);
  r = run_bertfit(
      train_mrpc(tmp / "model", tmp / "mrpc", "--max-steps 1 --class-weights balanced"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(want.str()), std::string::npos) << want.str() << "\n" << r.err;
  // Given weights are logged as given; the saved options keep them for --resume.
  r = run_bertfit(train_mrpc(tmp / "model", tmp / "given", "--max-steps 1 --class-weights 0.5,2"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("class weights (0.5,2): '0' 0.5, '1' 2"), std::string::npos) << r.err;
}

std::vector<std::vector<float>> read_params(const std::string& path) {
  SafetensorsFile f = SafetensorsFile::open(path);
  std::vector<std::vector<float>> out;
  for (const TensorInfo& t : f.tensors()) {
    std::vector<float> v(t.shape.numel());
    f.read_f32(t, v.data());
    out.push_back(std::move(v));
  }
  return out;
}

// Class weights make each micro-batch's loss a weighted mean; shares of the step's total weight
// make the step's loss the weighted mean over the whole step, so 2 micro-batches of 8 take the
// steps 1 batch of 16 takes. Tolerance as tests/comm/comm_train_test.cc argues for 2 ranks × b
// against 1 × 2b (each micro-batch padded to its own length, sums in another order): the change
// of every tensor over the 6 steps agrees to 1e-3 of its size, plus 2·Σ lr in max norm for the
// attention key biases, whose true gradient is 0. Weighting each micro-batch by its row count
// instead (the split-dependent mean) fails both checks with weights (1, 4): the first step's
// loss by ~2.5e-3 relative, and every tensor's change.
TEST(LossCli, ClassWeightedStepIsTheSameSplitIntoMicroBatches) {
  TempDir tmp;
  init_model(tmp / "model");
  const std::string common =
      "--max-steps 6 --warmup-steps 1 --lr 1e-3 --threads 1 --class-weights 1,4 ";
  RunResult one = run_bertfit(train_mrpc(tmp / "model", tmp / "one", common + "--batch-size 16"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  RunResult two =
      run_bertfit(train_mrpc(tmp / "model", tmp / "two", common + "--batch-size 8 --grad-accum 2"));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  // The logged step losses are the same weighted means.
  const std::vector<nlohmann::json> la = step_records(tmp / "one"), lb = step_records(tmp / "two");
  ASSERT_EQ(la.size(), lb.size());
  for (std::size_t s = 0; s < la.size(); ++s) {
    EXPECT_NEAR(la[s]["loss"].get<double>(), lb[s]["loss"].get<double>(),
                1e-3 * la[s]["loss"].get<double>())
        << "step " << s + 1;
  }
  SafetensorsFile names = SafetensorsFile::open(tmp / "model/model.safetensors");
  const auto p0 = read_params(tmp / "model/model.safetensors");
  const auto pa = read_params(tmp / "one/model.safetensors");
  const auto pb = read_params(tmp / "two/model.safetensors");
  ASSERT_EQ(p0.size(), pa.size());
  ASSERT_EQ(p0.size(), pb.size());
  const double lr_sum = 1e-3 * (0 + 1.0 + 0.8 + 0.6 + 0.4 + 0.2);
  for (std::size_t t = 0; t < p0.size(); ++t) {
    const std::string& name = names.tensors()[t].name;
    double diff2 = 0, ref2 = 0, max_abs = 0;
    for (std::size_t i = 0; i < p0[t].size(); ++i) {
      const double da = double{pa[t][i]} - p0[t][i], db = double{pb[t][i]} - p0[t][i];
      diff2 += (da - db) * (da - db);
      ref2 += da * da;
      max_abs = std::max(max_abs, std::fabs(da - db));
    }
    if (name.find("k_lin.bias") != std::string::npos) {
      EXPECT_LE(max_abs, 2 * lr_sum) << name;
    } else {
      EXPECT_GT(ref2, 0.0) << name << " did not move";
      EXPECT_LE(std::sqrt(diff2), 1e-3 * std::sqrt(ref2) + 1e-9) << name;
    }
  }
}

}  // namespace
}  // namespace bertfit::testing
