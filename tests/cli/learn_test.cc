// Training learns: a small randomly initialised DistilBERT (2 layers, hidden 64) trained for
// 200 steps of 32 SST-2 sentences reaches well above the majority-class accuracy on the SST-2
// dev set (444 of 872 positive: 50.9 %), in fp32 and, to the same accuracy, in bf16. Measured on
// 2026-12-02: 75.5 % after 300 steps and 74.9 % after 150 (lr 1e-3, warmup 10 %, seq 64); the bound
// of 65 % leaves room for different thread counts while failing on any model that does not learn.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace bertfit::testing {
namespace {

// Trains the same model on the same data in `precision`; returns the dev accuracy.
double sst2_accuracy(const TempDir& tmp, const std::string& precision) {
  RunResult r =
      run_bertfit("train --model " + (tmp / "model") + " --output " + (tmp / ("out-" + precision)) +
                  " --task sst2 --data " + shared_dir() + "/data/glue/SST-2" +
                  " --max-steps 200 --batch-size 32 --lr 1e-3 --warmup-ratio 0.1"
                  " --max-seq-len 64 --log-every 50 --precision " +
                  precision);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return 0;
  auto summary = nlohmann::json::parse(r.out.substr(r.out.rfind('{')));
  return summary["eval_accuracy"].get<double>();
}

TEST(Learning, TinyModelLearnsSst2InFp32AndBf16) {
  TempDir tmp;
  RunResult init = run_bertfit("init --arch distilbert --output " + (tmp / "model") +
                               " --set n_layers=2 --set dim=64 --set hidden_dim=128"
                               " --set n_heads=2 --seed 42");
  ASSERT_EQ(init.exit_code, 0) << init.err;
  const double fp32 = sst2_accuracy(tmp, "fp32");
  std::printf("SST-2 dev accuracy after 200 steps, fp32: %.4f (majority class 0.5092)\n", fp32);
  EXPECT_GT(fp32, 0.65);
  // bf16 must learn as well: the same accuracy within 2 points. 2 points is 17 of 872 dev
  // sentences, about 1.4 standard errors of an accuracy near 0.75 (√(0.75·0.25/872) = 1.5%):
  // two runs that differ only by rounding land that close; a broken bf16 path does not learn
  // (≈ 0.51) or learns visibly worse.
  const double bf16 = sst2_accuracy(tmp, "bf16");
  std::printf("SST-2 dev accuracy after 200 steps, bf16: %.4f\n", bf16);
  EXPECT_NEAR(bf16, fp32, 0.02);
}

}  // namespace
}  // namespace bertfit::testing
