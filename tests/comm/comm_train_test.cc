// Data-parallel training end to end under mpirun:
//  * equivalence: 2 ranks with per-rank batch b give the parameters 1 rank gets with batch 2b
//    (dropout off), also with gradient accumulation, with class weights and with a bf16 wire;
//  * failure: a rank that is killed or stalls makes the job exit non-zero within the timeout
//    with a message naming the rank, and --resume then completes the run;
//  * resume across rank counts: a 1-rank run stopped and resumed on 2 ranks with the same flags
//    ends where the uninterrupted run ends (the per-rank batch adapts to keep the global batch),
//    an explicit --batch-size that keeps it is accepted, one that does not is refused naming
//    the ones that would;
//  * user errors under mpirun are one line from rank 0 (no MPI_Abort banner).
//
// Tolerances. The two runs compute the same mean gradient in a different order: each rank pads
// its half-batch to its own longest row (different matrix shapes, so a different blocking of
// the fp32 sums), and the two halves are summed by the all-reduce instead of inside one
// product. Each gradient therefore differs by a few fp32 roundings of its terms, ~1e-6
// relative. AdamW divides m by √v, which turns a relative gradient error δ into about the same
// relative error of the update, except where |g| is itself at rounding level (the attention key
// biases, whose true gradient is 0, move by ±lr in a direction set by noise). Over K = 6 steps
// the parameter change Δ = θ_K − θ_0 of every tensor must agree to 1e-3 · ‖Δ‖ (≫ 6 · 1e-6,
// ≪ the O(1) error of a wrong shard or a missing 1/N), and key biases to 2·Σ lr in max norm.
// With a bf16 wire each gradient is rounded to 8 bits of mantissa (relative 2^-9 ≈ 2e-3) before
// the sum, so Adam's updates differ by up to ~2e-3 relative per step on every element: the
// bound is 3e-2 · ‖Δ‖ (≈ 6 steps × 2e-3, with a factor 2.5 for the sign-noise elements).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "../cli/cli_util.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "mpi_run.h"

namespace bertfit::testing {
namespace {

namespace fs = std::filesystem;

const std::string kMpirun = BERTFIT_MPIRUN;  // mpirun and its flags, without -np

std::string mrpc() { return shared_dir() + "/data/glue/MRPC"; }

struct Params {
  std::vector<std::string> names;
  std::vector<std::vector<float>> values;
};

Params read_params(const std::string& path) {
  SafetensorsFile f = SafetensorsFile::open(path);
  Params p;
  for (const TensorInfo& t : f.tensors()) {
    std::vector<float> v(t.shape.numel());
    f.read_f32(t, v.data());
    p.names.push_back(t.name);
    p.values.push_back(std::move(v));
  }
  return p;
}

// Compares the parameter changes of two runs from the same start, as argued at the top.
void expect_same_trajectory(const std::string& start, const std::string& a, const std::string& b,
                            double rel_bound, double lr_sum) {
  Params p0 = read_params(start), pa = read_params(a), pb = read_params(b);
  // A model trained for another head than the start's keeps only the encoder's tensors.
  Params kept;
  for (std::size_t t = 0; t < p0.names.size(); ++t) {
    if (std::find(pa.names.begin(), pa.names.end(), p0.names[t]) == pa.names.end()) continue;
    kept.names.push_back(p0.names[t]);
    kept.values.push_back(p0.values[t]);
  }
  p0 = std::move(kept);
  ASSERT_EQ(p0.names, pa.names);
  ASSERT_EQ(p0.names, pb.names);
  double moved = 0;
  for (std::size_t t = 0; t < p0.names.size(); ++t) {
    double diff2 = 0, ref2 = 0, max_abs = 0;
    for (std::size_t i = 0; i < p0.values[t].size(); ++i) {
      double da = double{pa.values[t][i]} - p0.values[t][i];
      double db = double{pb.values[t][i]} - p0.values[t][i];
      diff2 += (da - db) * (da - db);
      ref2 += da * da;
      max_abs = std::max(max_abs, std::fabs(da - db));
    }
    moved += ref2;
    const std::string& name = p0.names[t];
    if (name.find("k_lin.bias") != std::string::npos ||
        name.find("attention.self.key.bias") != std::string::npos) {
      EXPECT_LE(max_abs, 2 * lr_sum) << name;
    } else {
      EXPECT_LE(std::sqrt(diff2), rel_bound * std::sqrt(ref2) + 1e-9) << name;
    }
  }
  EXPECT_GT(moved, 0.0) << "the parameters did not move: nothing was compared";
}

class DistTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    RunResult r = run_bertfit("init --arch distilbert --output " + (tmp_ / "model") +
                              " --set n_layers=2 --set dim=32 --set hidden_dim=64 --set n_heads=2"
                              " --set dropout=0 --set attention_dropout=0"
                              " --set seq_classif_dropout=0 --seed 3");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // 6 steps, lr 1e-3 with 1 warmup step: Σ lr = 1e-3 · (0 + 5/5 + 4/5 + 3/5 + 2/5 + 1/5) = 3e-3.
  std::string train_args(const std::string& out, int batch, const std::string& extra) {
    return "train --model " + (tmp_ / "model") + " --output " + out + " --task mrpc --data " +
           mrpc() +
           " --max-steps 6 --warmup-steps 1 --lr 1e-3 --max-seq-len 64 --eval-every never" +
           " --batch-size " + std::to_string(batch) + " " + extra;
  }
  TempDir tmp_;
};

TEST_F(DistTrain, TwoRanksEqualOneRankWithTwiceTheBatch) {
  RunResult one = run_bertfit(train_args(tmp_ / "one", 16, "--threads 1"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  RunResult two = run_mpi(2, train_args(tmp_ / "two", 8, ""));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NE(two.err.find("rank 1 of 2"), std::string::npos) << two.err;
  expect_same_trajectory(tmp_ / "model/model.safetensors", tmp_ / "one/model.safetensors",
                         tmp_ / "two/model.safetensors", 1e-3, 3e-3);
}

// The families declared since (RoBERTa's positions, ELECTRA's projection) and the token head
// (tagged words) train on two ranks as on one with twice the batch. A token head's loss is the
// mean over each rank's labelled tokens and the step's gradient the mean of the ranks' (as
// transformers under DDP), which equals one rank's mean over all tokens when every sentence
// has as many words, as here (4).
TEST_F(DistTrain, NewFamiliesAndATokenHeadOnTwoRanksEqualOneRank) {
  const std::string sets =
      " --set num_hidden_layers=1 --set hidden_size=24 --set num_attention_heads=2"
      " --set intermediate_size=40 --set hidden_dropout_prob=0 --set attention_probs_dropout_prob=0"
      " --set classifier_dropout=0 --seed 5";
  std::string conll;
  for (const char* s : {"EU B-ORG\nrejects O\nGerman B-MISC\ncall O\n\n",
                        "Peter B-PER\nBlackburn I-PER\nwrote O\nit O\n\n",
                        "BRUSSELS B-LOC\n1996-08-22 O\nwas O\nrainy O\n\n",
                        "The O\nEuropean B-ORG\nCommission I-ORG\nsaid O\n\n"}) {
    for (int i = 0; i < 8; ++i) conll += s;
  }
  write_text(tmp_ / "ner.conll", conll);
  struct Case {
    const char* name;
    std::string init, data;
  };
  const Case cases[] = {
      {"roberta", "init --arch roberta --vocab " + shared_dir() + "/data/roberta-bpe" + sets,
       " --task mrpc --data " + mrpc() + " --max-seq-len 64"},
      {"electra", "init --arch electra --set embedding_size=12" + sets,
       " --task mrpc --data " + mrpc() + " --max-seq-len 64"},
      {"bert-ner",
       "init --arch bert --task token-classification --labels "
       "B-LOC,B-MISC,B-ORG,B-PER,I-ORG,I-PER,O" +
           sets,
       " --train-file " + (tmp_ / "ner.conll")},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string start = tmp_ / c.name;
    RunResult init = run_bertfit(c.init + " --output " + start);
    ASSERT_EQ(init.exit_code, 0) << init.err;
    auto args = [&](const std::string& out, int batch, const std::string& extra) {
      return "train --model " + start + " --output " + out + c.data +
             " --max-steps 6 --warmup-steps 1 --lr 1e-3 --eval-every never --batch-size " +
             std::to_string(batch) + " " + extra;
    };
    RunResult one = run_bertfit(args(start + "-one", 16, "--threads 1"));
    ASSERT_EQ(one.exit_code, 0) << one.err;
    RunResult two = run_mpi(2, args(start + "-two", 8, ""));
    ASSERT_EQ(two.exit_code, 0) << two.err;
    expect_same_trajectory(start + "/model.safetensors", start + "-one/model.safetensors",
                           start + "-two/model.safetensors", 1e-3, 3e-3);
  }
}

// Sentence-embedding training gathers every rank's embeddings: each anchor meets the global
// micro-batch's candidates (MultipleNegativesRankingLoss) and CoSENT ranks every pair of the
// global batch, so 2 ranks × 8 rows equal 1 rank × 16 (the losses are invariant to the order the
// ranks' rows are gathered in).
TEST_F(DistTrain, SentenceEmbeddingsOnTwoRanksEqualOneRankWithTheGlobalBatch) {
  const std::string start = tmp_ / "bert";
  RunResult init = run_bertfit(
      "init --arch bert --set num_hidden_layers=1 --set hidden_size=24 --set num_attention_heads=2"
      " --set intermediate_size=40 --set hidden_dropout_prob=0"
      " --set attention_probs_dropout_prob=0 --seed 5 --output " +
      start);
  ASSERT_EQ(init.exit_code, 0) << init.err;
  const std::string stsb = shared_dir() + "/data/glue/STS-B/train.tsv";
  const std::string sts_columns =
      " --train-file " + stsb + " --text-a-column sentence1 --text-b-column sentence2";
  const struct {
    const char* name;
    std::string data;
  } cases[] = {{"mnrl", sts_columns + " --loss mnrl --pooling mean"},
               {"cosent", sts_columns + " --label-column score --pooling cls"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto args = [&](const std::string& out, int batch, const std::string& extra) {
      return "train --objective embedding --model " + start + " --output " + out + c.data +
             " --max-steps 6 --warmup-steps 1 --lr 1e-3 --max-seq-len 32 --batch-size " +
             std::to_string(batch) + " " + extra;
    };
    const std::string one_dir = start + "-" + c.name + "-one",
                      two_dir = start + "-" + c.name + "-two";
    RunResult one = run_bertfit(args(one_dir, 16, "--threads 1"));
    ASSERT_EQ(one.exit_code, 0) << one.err;
    RunResult two = run_mpi(2, args(two_dir, 8, ""));
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_TRUE(fs::exists(two_dir + "/modules.json"));
    expect_same_trajectory(start + "/model.safetensors", one_dir + "/model.safetensors",
                           two_dir + "/model.safetensors", 1e-3, 3e-3);
  }
}

// The Dense module's gradient group (the embedding head's, reported first) is all-reduced as the
// encoder's are: tests/fixtures/st/st-bert-dense (mean pooling, Dense 16 -> 8, Normalize), dropout
// off, on 2 ranks × 8 pairs moves the Dense weights as 1 rank × 16 does.
TEST_F(DistTrain, DenseModuleOnTwoRanksEqualsOneRankWithTheGlobalBatch) {
  const std::string start = tmp_ / "dense";
  fs::copy(std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/st/st-bert-dense/model", start,
           fs::copy_options::recursive);
  nlohmann::json config = nlohmann::json::parse(read_text(start + "/config.json"));
  config["hidden_dropout_prob"] = 0.0;
  config["attention_probs_dropout_prob"] = 0.0;
  write_text(start + "/config.json", config.dump(2));
  auto args = [&](const std::string& out, int batch, const std::string& extra) {
    return "train --model " + start + " --output " + out + " --train-file " + shared_dir() +
           "/data/glue/STS-B/train.tsv --text-a-column sentence1 --text-b-column sentence2"
           " --loss mnrl --max-steps 6 --warmup-steps 1 --lr 1e-3 --max-seq-len 32"
           " --batch-size " +
           std::to_string(batch) + " " + extra;
  };
  RunResult one = run_bertfit(args(tmp_ / "dense-one", 16, "--threads 1"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  RunResult two = run_mpi(2, args(tmp_ / "dense-two", 8, ""));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  auto dense = [](const std::string& dir) {
    const Checkpoint c =
        Checkpoint::open(dir + "/2_Dense/pytorch_model.bin", CheckpointFormat::kPytorch);
    std::map<std::string, std::vector<float>> out;
    for (const CheckpointTensor& t : c.tensors()) {
      out[t.name].resize(t.shape.numel());
      read_f32(t, out[t.name].data());
    }
    return out;
  };
  const auto p0 = dense(start), pa = dense(tmp_ / "dense-one"), pb = dense(tmp_ / "dense-two");
  ASSERT_EQ(p0.size(), 2u);
  for (const auto& [name, v0] : p0) {
    ASSERT_EQ(pa.at(name).size(), v0.size());
    ASSERT_EQ(pb.at(name).size(), v0.size());
    double diff2 = 0, ref2 = 0;
    for (std::size_t i = 0; i < v0.size(); ++i) {
      const double da = double{pa.at(name)[i]} - v0[i], db = double{pb.at(name)[i]} - v0[i];
      diff2 += (da - db) * (da - db);
      ref2 += da * da;
    }
    EXPECT_GT(ref2, 0) << name << " did not move";
    EXPECT_LE(std::sqrt(diff2), 1e-3 * std::sqrt(ref2) + 1e-9) << name;
  }
}

// `srun -n 2` without --mpi=pmix starts two processes that see no ranks: each would train
// alone into the same --output. The first thing train does is refuse, on one line naming the
// fix, before it writes anything.
TEST_F(DistTrain, SrunWithoutPmixIsRefusedBeforeAnythingIsWritten) {
  setenv("SLURM_STEP_NUM_TASKS", "2", 1);
  RunResult r = run_bertfit(train_args(tmp_ / "out", 8, ""));
  unsetenv("SLURM_STEP_NUM_TASKS");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("srun --mpi=pmix"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(tmp_ / "out"));
}

TEST_F(DistTrain, TwoRanksWithAccumulationEqualOneRank) {
  RunResult one = run_bertfit(train_args(tmp_ / "one", 16, "--grad-accum 2 --threads 1"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  RunResult two = run_mpi(2, train_args(tmp_ / "two", 8, "--grad-accum 2"));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  expect_same_trajectory(tmp_ / "model/model.safetensors", tmp_ / "one/model.safetensors",
                         tmp_ / "two/model.safetensors", 1e-3, 3e-3);
}

// Class weights: each rank's micro-batch loss is a weighted mean, weighted by its part of the
// step's total weight (not of its rows), so the step is the weighted mean over all its samples.
TEST_F(DistTrain, TwoRanksWithClassWeightsEqualOneRank) {
  RunResult one = run_bertfit(train_args(tmp_ / "one", 16, "--class-weights 1,4 --threads 1"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  RunResult two = run_mpi(2, train_args(tmp_ / "two", 8, "--class-weights 1,4"));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  expect_same_trajectory(tmp_ / "model/model.safetensors", tmp_ / "one/model.safetensors",
                         tmp_ / "two/model.safetensors", 1e-3, 3e-3);
}

TEST_F(DistTrain, Bf16WireStaysCloseToFp32) {
  RunResult one = run_bertfit(train_args(tmp_ / "one", 16, "--threads 1"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  RunResult two = run_mpi(2, train_args(tmp_ / "two", 8, "--grad-comm-dtype bf16"));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  expect_same_trajectory(tmp_ / "model/model.safetensors", tmp_ / "one/model.safetensors",
                         tmp_ / "two/model.safetensors", 3e-2, 3e-3);
}

// The PID of the process with OMPI_COMM_WORLD_RANK=rank among mpirun's children.
pid_t find_rank(pid_t mpirun, int rank) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string pid, comm, state;
    long ppid = 0;
    stat >> pid >> comm >> state >> ppid;
    if (ppid != mpirun) continue;
    std::string env = read_text(entry.path() / "environ");
    if (env.find("OMPI_COMM_WORLD_RANK=" + std::to_string(rank) + '\0') != std::string::npos) {
      return static_cast<pid_t>(std::stol(name));
    }
  }
  return -1;
}

// Starts a 2-rank run, waits for its first checkpoint, applies `signal` to rank 1, and returns
// mpirun's exit status, the seconds until it exited, and its stderr.
struct Interrupted {
  int exit_code;
  double seconds;
  std::string err;
};
Interrupted interrupt_rank1(const std::string& args, const std::string& checkpoint, int sig) {
  TempDir tmp;
  std::string cmd = "exec " + kMpirun + " -np 2 " + bertfit_binary() + " " + args + " 2>" +
                    (tmp / "err") + " >/dev/null";
  pid_t mpirun = fork();
  if (mpirun == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  pid_t victim = -1;
  for (int i = 0; i < 6000 && victim < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (fs::exists(checkpoint)) victim = find_rank(mpirun, 1);
  }
  auto t0 = std::chrono::steady_clock::now();
  if (victim > 0) kill(victim, sig);
  int status = 0;
  waitpid(mpirun, &status, 0);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (victim > 0 && sig == SIGSTOP) kill(victim, SIGKILL);
  Interrupted r{WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), seconds,
                read_text(tmp / "err")};
  EXPECT_GT(victim, 0) << "rank 1 not found or no checkpoint written";
  return r;
}

TEST_F(DistTrain, KilledRankStopsTheJobAndResumeCompletes) {
  const std::string args = "train --model " + (tmp_ / "model") + " --output " + (tmp_ / "out") +
                           " --task mrpc --data " + mrpc() +
                           " --max-steps 120 --batch-size 8 --max-seq-len 64 --save-every 2"
                           " --eval-every never --comm-timeout 10";
  Interrupted r = interrupt_rank1(args, tmp_ / "out/checkpoint/trainer_state.json", SIGKILL);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.seconds, 10 + 20.0);
  EXPECT_NE(r.err.find("rank 1"), std::string::npos) << r.err;
  int step = nlohmann::json::parse(read_text(tmp_ / "out/checkpoint/trainer_state.json"))["step"];
  EXPECT_LT(step, 120);
  // Resume on one process (a different N) to the end.
  RunResult resumed = run_bertfit(args + " --resume " + (tmp_ / "out"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  auto state = nlohmann::json::parse(read_text(tmp_ / "out/checkpoint/trainer_state.json"));
  EXPECT_EQ(state["samples_seen"], 120 * 16);
}

TEST_F(DistTrain, StalledRankTimesOutWithAMessage) {
  const std::string args = "train --model " + (tmp_ / "model") + " --output " + (tmp_ / "out") +
                           " --task mrpc --data " + mrpc() +
                           " --max-steps 120 --batch-size 8 --max-seq-len 64 --save-every 2"
                           " --eval-every never --comm-timeout 3";
  Interrupted r = interrupt_rank1(args, tmp_ / "out/checkpoint/trainer_state.json", SIGSTOP);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.seconds, 3 + 20.0);
  EXPECT_NE(r.err.find("rank"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("3 s"), std::string::npos) << r.err;
}

// A 1-rank run (batch 16) stopped by SIGTERM after a checkpoint, then resumed with the same
// command under mpirun -np 2: the ranks take 8 each, and the run ends where the uninterrupted
// 1-rank run ends. Dropout is off (the fixture's model), so the two differ only by the fp32
// rounding of the steps after the resume, as in the equivalence tests above: ≤ 40 steps of
// ~1e-6 relative error each stay far below 1e-3 · ‖Δ‖; Σ lr = 1e-3 · (39 · 40 / 2) / 39 = 0.02.
TEST_F(DistTrain, OneRankRunResumedOnTwoRanksEndsWhereItWouldHave) {
  auto args = [&](const std::string& out) {
    return "train --model " + (tmp_ / "model") + " --output " + out + " --task mrpc --data " +
           mrpc() +
           " --max-steps 40 --warmup-steps 1 --lr 1e-3 --max-seq-len 64 --eval-every never"
           " --batch-size 16 --save-every 2";
  };
  RunResult whole = run_bertfit(args(tmp_ / "whole") + " --threads 1");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;

  // Stop the 1-rank run at a step boundary once it has a checkpoint (it writes one as it stops).
  const std::string cmd =
      "exec " + bertfit_binary() + " " + args(tmp_ / "out") + " --threads 1 >/dev/null 2>&1";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::string state = tmp_ / "out/checkpoint/trainer_state.json";
  for (int i = 0; i < 6000 && !fs::exists(state); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM)
      << "the run was not stopped by SIGTERM (finished first?): status " << status;
  const int stopped = nlohmann::json::parse(read_text(state))["step"];
  ASSERT_LT(stopped, 40);

  RunResult resumed = run_mpi(2, args(tmp_ / "out") + " --resume " + (tmp_ / "out"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("on 2 ranks that is --batch-size 8 --grad-accum 1"), std::string::npos)
      << resumed.err;
  auto st = nlohmann::json::parse(read_text(state));
  EXPECT_EQ(st["step"], 40);
  EXPECT_EQ(st["samples_seen"], 40 * 16);
  EXPECT_EQ(st["world"], 2);
  expect_same_trajectory(tmp_ / "model/model.safetensors", tmp_ / "whole/model.safetensors",
                         tmp_ / "out/model.safetensors", 1e-3, 0.02);
}

// The error of a failed mpirun: exits non-zero, one "bertfit:" line (rank 0's) containing `needle`,
// no MPI_Abort banner. mpirun itself adds a notice that a process exited non-zero unless it
// runs with -q (Open MPI): then the line is all of stderr.
void expect_job_error(int np, const std::string& args, const std::string& needle) {
  RunResult r = run_mpi(np, args);
  EXPECT_NE(r.exit_code, 0) << r.err;
  std::istringstream lines(r.err);
  std::string ours;
  int count = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("bertfit:", 0) == 0) {
      ours = line;
      ++count;
    }
  }
  EXPECT_EQ(count, 1) << r.err;
  EXPECT_EQ(ours.rfind("bertfit: error: ", 0), 0u) << r.err;
  EXPECT_NE(ours.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("MPI_ABORT"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("rank 1"), std::string::npos) << r.err;
  if (kMpirun.find("--mca") != std::string::npos) {  // Open MPI's flags: it has -q
    RunResult quiet = run_mpi(np, args, "-q");
    EXPECT_EQ(quiet.exit_code, r.exit_code) << quiet.err;
    EXPECT_EQ(std::count(quiet.err.begin(), quiet.err.end(), '\n'), 1) << quiet.err;
    EXPECT_EQ(quiet.err.rfind("bertfit: error: ", 0), 0u) << quiet.err;
  }
}

// A 1-rank checkpoint of 32 samples per step resumed on 2 ranks: --batch-size 16 keeps it and
// is accepted; --batch-size 5 is refused on one line naming the shapes that keep it; a run of
// 5 samples per step cannot be shared by 2 ranks. Refusals, bad flags and unknown flags under
// mpirun are one line from rank 0 (--max-seq-len 128 truncates no MRPC row: no warning either).
TEST_F(DistTrain, ResumeOnTwoRanksKeepsTheGlobalBatchAndErrorsAreOneLine) {
  auto args = [&](const std::string& out, const std::string& extra) {
    return "train --model " + (tmp_ / "model") + " --output " + out + " --task mrpc --data " +
           mrpc() + " --lr 1e-3 --max-seq-len 128 --eval-every never " + extra;
  };
  const std::string out = tmp_ / "out";
  RunResult first = run_bertfit(args(out, "--max-steps 2 --batch-size 32"));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string resume = " --resume " + out;
  expect_job_error(2, args(out, "--max-steps 4 --batch-size 5" + resume),
                   "--resume: --batch-size 5 × --grad-accum 1 × 2 ranks take 10 samples per "
                   "optimizer step, but the checkpoint's run takes 32 samples per optimizer step "
                   "(1 rank × 32 × 1 accumulation); to keep it on 2 ranks give --batch-size 16 "
                   "--grad-accum 1, --batch-size 8 --grad-accum 2");
  expect_job_error(2, args(out, "--max-steps 4 --batch-size 32 --weight-decay 0.5" + resume),
                   "--resume: the run's options differ from the checkpoint's: --weight-decay is "
                   "0.5");
  expect_job_error(2, args(out, "--max-steps 4 --batch-size 0"), "--batch-size must be > 0");
  expect_job_error(2, args(out, "--max-steps 4 --batch-sise 16"), "unknown flag '--batch-sise'");

  RunResult two = run_mpi(2, args(out, "--max-steps 4 --batch-size 16" + resume));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NE(two.err.find("2 steps of 32 samples (2 ranks × 16 × 1 accumulation)"),
            std::string::npos)
      << two.err;
  auto state = nlohmann::json::parse(read_text(out + "/checkpoint/trainer_state.json"));
  EXPECT_EQ(state["step"], 4);
  EXPECT_EQ(state["samples_seen"], 4 * 32);

  const std::string odd = tmp_ / "odd";
  RunResult five = run_bertfit(args(odd, "--max-steps 1 --batch-size 5"));
  ASSERT_EQ(five.exit_code, 0) << five.err;
  expect_job_error(2, args(odd, "--max-steps 2 --batch-size 5 --resume " + odd),
                   "2 ranks cannot share evenly; resume it on 1 or 5 ranks");
}

}  // namespace
}  // namespace bertfit::testing
