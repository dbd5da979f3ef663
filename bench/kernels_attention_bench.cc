// Multi-head attention of one DistilBERT layer's training step at batch 32 × 128 (C = 768,
// H = 12, dropout 0.1 on the probabilities), forward and backward, bf16 and fp32 QKV. Argument:
// real tokens per sequence (128: every token real; 64: half of each sequence padding, the keys
// and queries after it skipped as in unpadded training). Counter GFLOP (per second): the per-head
// products' flops (2 · T_real² · D each) per second; the rest of the time is softmax, dropout
// and operand packing. Compare within one run:
//   build/release/bench/kernels_attention_bench --benchmark_repetitions=5
//     --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
// (one command line).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "base/aligned.h"
#include "base/dtype.h"
#include "kernels/kernels.h"

namespace bertfit {
namespace {

constexpr int kB = 32, kT = 128, kC = 768, kH = 12;
constexpr float kP = 0.1f;
constexpr std::uint64_t kKey = 777;

struct Inputs {
  AlignedBuffer<float> qkv, dout;
  AlignedBuffer<std::uint16_t> qkv_bf16;
  std::vector<std::int32_t> mask;
  AttentionShape shape{kB, kT, kC, kH, true, 0};
  explicit Inputs(int real)
      : qkv(std::int64_t{kB} * kT * 3 * kC),
        dout(std::int64_t{kB} * kT * kC),
        qkv_bf16(qkv.size()),
        mask(std::size_t{kB} * kT) {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(qkv.size()); ++i) {
      qkv[i] = normal(rng);
      qkv_bf16[i] = f32_to_bf16(qkv[i]);
    }
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(dout.size()); ++i) dout[i] = normal(rng);
    for (int b = 0; b < kB; ++b) {
      for (int t = 0; t < kT; ++t) mask[static_cast<std::size_t>(b) * kT + t] = t < real ? 1 : 0;
    }
  }
};

void set_flops(benchmark::State& bm, int real, int products) {
  const double flops = 2.0 * real * real * (kC / kH) * kH * kB * products;
  bm.counters["GFLOP"] = benchmark::Counter(flops * 1e-9 * static_cast<double>(bm.iterations()),
                                            benchmark::Counter::kIsRate);
}

template <bool kBf16>
void BM_AttentionForward(benchmark::State& bm) {
  const int real = static_cast<int>(bm.range(0));
  Inputs in(real);
  AlignedBuffer<float> out(in.dout.size()), probs(std::int64_t{kB} * kH * kT * kT);
  for (auto _ : bm) {
    if constexpr (kBf16) {
      attention_forward(out.data(), probs.data(), in.qkv_bf16.data(), in.mask.data(), in.shape, kP,
                        kKey);
    } else {
      attention_forward(out.data(), probs.data(), in.qkv.data(), in.mask.data(), in.shape, kP,
                        kKey);
    }
    benchmark::DoNotOptimize(out.data());
  }
  set_flops(bm, real, 2);
}

template <bool kBf16>
void BM_AttentionBackward(benchmark::State& bm) {
  const int real = static_cast<int>(bm.range(0));
  Inputs in(real);
  AlignedBuffer<float> out(in.dout.size()), probs(std::int64_t{kB} * kH * kT * kT),
      dqkv(in.qkv.size());
  if constexpr (kBf16) {
    attention_forward(out.data(), probs.data(), in.qkv_bf16.data(), in.mask.data(), in.shape, kP,
                      kKey);
  } else {
    attention_forward(out.data(), probs.data(), in.qkv.data(), in.mask.data(), in.shape, kP, kKey);
  }
  for (auto _ : bm) {
    if constexpr (kBf16) {
      attention_backward(dqkv.data(), in.dout.data(), in.qkv_bf16.data(), probs.data(),
                         in.mask.data(), in.shape, kP, kKey);
    } else {
      attention_backward(dqkv.data(), in.dout.data(), in.qkv.data(), probs.data(), in.mask.data(),
                         in.shape, kP, kKey);
    }
    benchmark::DoNotOptimize(dqkv.data());
  }
  set_flops(bm, real, 4);
}

BENCHMARK(BM_AttentionForward<true>)->Arg(128)->Arg(64)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AttentionBackward<true>)->Arg(128)->Arg(64)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AttentionForward<false>)->Arg(128)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AttentionBackward<false>)->Arg(128)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace bertfit

BENCHMARK_MAIN();
