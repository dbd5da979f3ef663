// Training learns: a small randomly initialised DistilBERT (2 layers, hidden 64) trained for
// 200 steps of 32 SST-2 sentences reaches well above the majority-class accuracy on the SST-2
// dev set (444 of 872 positive: 50.9 %). Measured on 2026-12-02: 75.5 % after 300 steps and
// 74.9 % after 150 (lr 1e-3, warmup 10 %, seq 64); the bound of 65 % leaves room for
// different thread counts while failing on any model that does not learn.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace bertfit::testing {
namespace {

TEST(Learning, TinyModelLearnsSst2) {
  TempDir tmp;
  RunResult init = run_bertfit("init --arch distilbert --output " + (tmp / "model") +
                               " --set n_layers=2 --set dim=64 --set hidden_dim=128"
                               " --set n_heads=2 --seed 42");
  ASSERT_EQ(init.exit_code, 0) << init.err;
  RunResult r = run_bertfit("train --model " + (tmp / "model") + " --output " + (tmp / "out") +
                            " --task sst2 --data " + shared_dir() + "/data/glue/SST-2" +
                            " --max-steps 200 --batch-size 32 --lr 1e-3 --warmup-ratio 0.1"
                            " --max-seq-len 64 --log-every 50");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto summary = nlohmann::json::parse(r.out.substr(r.out.rfind('{')));
  double accuracy = summary["eval_accuracy"];
  std::printf("SST-2 dev accuracy after 200 steps: %.4f (majority class 0.5092)\n", accuracy);
  EXPECT_GT(accuracy, 0.65);
}

}  // namespace
}  // namespace bertfit::testing
