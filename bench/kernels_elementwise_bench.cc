// The element-wise kernels of one DistilBERT layer's training step at batch 32 × 128 (4096 token
// rows, C = 768, I = 3072), fused forms against the chains they replace. Counter GB/s: the bytes
// each variant must move (its tensors read and written once) per second, so a memory-bound
// kernel shows the machine's bandwidth and a compute-bound one falls below it. Compare within
// one run:
//   build/release/bench/kernels_elementwise_bench --benchmark_repetitions=5
//     --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
// (one command line).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>

#include "base/aligned.h"
#include "base/dtype.h"
#include "kernels/kernels.h"

namespace bertfit {
namespace {

constexpr std::int64_t kRows = 4096, kC = 768, kI = 3072;
constexpr float kP = 0.1f;  // hidden dropout
constexpr std::uint64_t kKey = 12345;

AlignedBuffer<float> random_floats(std::int64_t n, std::uint32_t seed) {
  AlignedBuffer<float> v(n);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::int64_t i = 0; i < n; ++i) v[i] = normal(rng);
  return v;
}

AlignedBuffer<std::uint16_t> random_bf16(std::int64_t n, std::uint32_t seed) {
  AlignedBuffer<float> f = random_floats(n, seed);
  AlignedBuffer<std::uint16_t> v(n);
  for (std::int64_t i = 0; i < n; ++i) v[i] = f32_to_bf16(f[i]);
  return v;
}

void set_bytes(benchmark::State& bm, double bytes) {
  bm.counters["GB/s"] = benchmark::Counter(bytes * 1e-9 * static_cast<double>(bm.iterations()),
                                           benchmark::Counter::kIsRate);
}

// GELU's forward from ff1's bf16 output (read 2, write 2), and training's form that also writes
// GELU' over its input (read 2, write 4).
void BM_GeluForward(benchmark::State& bm) {
  const bool keep = bm.range(0) != 0;
  const std::int64_t n = kRows * kI;
  const AlignedBuffer<std::uint16_t> y0 = random_bf16(n, 2);
  AlignedBuffer<std::uint16_t> y = random_bf16(n, 2), z(n);
  for (auto _ : bm) {
    if (keep) {
      bm.PauseTiming();
      std::copy(y0.data(), y0.data() + n, y.data());  // the kernel overwrote the input
      bm.ResumeTiming();
      activation_forward_bf16_keep_derivative(ActKind::kGelu, z.data(), y.data(), n);
    } else {
      activation_forward_bf16(ActKind::kGelu, z.data(), y.data(), n);
    }
    benchmark::ClobberMemory();
  }
  set_bytes(bm, static_cast<double>(n) * (keep ? 6 : 4));
}
BENCHMARK(BM_GeluForward)
    ->ArgName("keep_derivative")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);

// GELU's backward before ff1 from the kept derivative, with the bias gradient and the bf16
// cast (read 2 + 2, write 2).
void BM_GeluBiasBackward(benchmark::State& bm) {
  const std::int64_t n = kRows * kI;
  AlignedBuffer<float> db(kI);
  AlignedBuffer<std::uint16_t> dz = random_bf16(n, 1), d = random_bf16(n, 2), g(n);
  for (auto _ : bm) {
    derivative_bias_backward_bf16(db.data(), g.data(), dz.data(), d.data(), kRows, kI);
    benchmark::ClobberMemory();
  }
  set_bytes(bm, static_cast<double>(n) * 6);
}
BENCHMARK(BM_GeluBiasBackward)->Unit(benchmark::kMillisecond);

// r = x + Drop(y); out = LN(r): the three kernels in turn (y: read 4, write 4; add: read 8,
// write 4; LN: read 4, write 4) against the fused pass (read 8, write 8), counted as the fused
// pass's bytes in both.
void BM_DropoutAddLayerNorm(benchmark::State& bm) {
  const bool fused = bm.range(0) != 0;
  const std::int64_t n = kRows * kC;
  AlignedBuffer<float> y = random_floats(n, 3), x = random_floats(n, 4), w = random_floats(kC, 5),
                       b = random_floats(kC, 6), res(n), out(n), mean(kRows), rstd(kRows);
  for (auto _ : bm) {
    if (fused) {
      dropout_add_layernorm_forward(out.data(), res.data(), mean.data(), rstd.data(), y.data(),
                                    x.data(), w.data(), b.data(), kRows, kC, 1e-12f, kP, kKey);
    } else {
      dropout_forward(res.data(), y.data(), n, kP, kKey);
      add_forward(res.data(), res.data(), x.data(), n);
      layernorm_forward(out.data(), mean.data(), rstd.data(), res.data(), w.data(), b.data(), kRows,
                        kC, 1e-12f);
    }
    benchmark::ClobberMemory();
  }
  set_bytes(bm, static_cast<double>(n) * 16);
}
BENCHMARK(BM_DropoutAddLayerNorm)->ArgName("fused")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// LN2's backward, dropout's, and ff2's bias gradient with the bf16 cast: the three kernels in
// turn against the fused pass (read dout, res 8; write dres 4, dy bf16 2), counted as the fused
// pass's bytes in both.
void BM_LayerNormDropoutBiasBackward(benchmark::State& bm) {
  const bool fused = bm.range(0) != 0;
  const std::int64_t n = kRows * kC;
  AlignedBuffer<float> dout = random_floats(n, 7), res = random_floats(n, 8),
                       w = random_floats(kC, 9), b = random_floats(kC, 10), out(n), mean(kRows),
                       rstd(kRows), dres(n), dy(n), dw(kC), dbias(kC), yb(kC);
  AlignedBuffer<std::uint16_t> dy16(n);
  layernorm_forward(out.data(), mean.data(), rstd.data(), res.data(), w.data(), b.data(), kRows, kC,
                    1e-12f);
  for (auto _ : bm) {
    if (fused) {
      layernorm_dropout_bias_backward(dres.data(), dw.data(), dbias.data(), nullptr, dy16.data(),
                                      yb.data(), dout.data(), res.data(), w.data(), mean.data(),
                                      rstd.data(), kRows, kC, kP, kKey);
    } else {
      layernorm_backward(dres.data(), dw.data(), dbias.data(), dout.data(), res.data(), w.data(),
                         mean.data(), rstd.data(), kRows, kC);
      dropout_backward(dy.data(), dres.data(), n, kP, kKey);
      bias_backward_cast(yb.data(), dy16.data(), dy.data(), kRows, kC);
    }
    benchmark::ClobberMemory();
  }
  set_bytes(bm, static_cast<double>(n) * 14);
}
BENCHMARK(BM_LayerNormDropoutBiasBackward)
    ->ArgName("fused")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace bertfit

BENCHMARK_MAIN();
