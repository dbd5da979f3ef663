// bf16 matrix products of the model's Linear shapes through gemm/, at 4096 token rows (batch 32
// of 128 tokens): forward and backward-input from a plain bf16 weight against a prepared one
// (PreparedWeightBf16), the weight gradient (which lays its x operand out itself), preparing a
// weight, and the ceiling of one core: a loop of independent vdpbf16ps on registers only.
// Counter GFLOP/s. On a noisy machine interleave and repeat, and compare within one run:
//   OMP_NUM_THREADS=2 build/release/bench/gemm_bench --benchmark_repetitions=3
//     --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
// (one command line).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "base/dtype.h"
#include "gemm/gemm.h"

namespace bertfit {
namespace {

constexpr std::int64_t kRows = 4096;

// Operands of one (N,K) Linear at kRows rows, random, in bf16 (and the fp32 weight).
struct Operands {
  Operands(std::int64_t N, std::int64_t K) : w(N * K), wb(N * K), x(kRows * K), dy(kRows * N) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1, 1);
    for (std::size_t i = 0; i < w.size(); ++i) wb[i] = f32_to_bf16(w[i] = u(rng));
    for (auto& v : x) v = f32_to_bf16(u(rng));
    for (auto& v : dy) v = f32_to_bf16(u(rng));
    prepared.prepare(w.data(), N, K, /*with_backward=*/true);
  }
  std::vector<float> w;
  std::vector<std::uint16_t> wb, x, dy;
  PreparedWeightBf16 prepared;
};

void set_rate(benchmark::State& state, double flop_per_iteration) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(flop_per_iteration * 1e-9 * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

// Args: N, K, prepared (0/1).
void BM_Forward(benchmark::State& state) {
  const std::int64_t N = state.range(0), K = state.range(1);
  Operands o(N, K);
  std::vector<float> y(kRows * N);
  for (auto _ : state) {
    if (state.range(2) != 0) {
      linear_forward_bf16(y.data(), o.x.data(), o.prepared, nullptr, kRows);
    } else {
      linear_forward_bf16(y.data(), o.x.data(), o.wb.data(), nullptr, kRows, K, N);
    }
    benchmark::DoNotOptimize(y.data());
  }
  set_rate(state, 2.0 * kRows * N * K);
}

void BM_BackwardInput(benchmark::State& state) {
  const std::int64_t N = state.range(0), K = state.range(1);
  Operands o(N, K);
  std::vector<float> dx(kRows * K);
  for (auto _ : state) {
    if (state.range(2) != 0) {
      linear_backward_input_bf16(dx.data(), o.dy.data(), o.prepared, kRows, Output::kOverwrite);
    } else {
      linear_backward_input_bf16(dx.data(), o.dy.data(), o.wb.data(), kRows, K, N,
                                 Output::kOverwrite);
    }
    benchmark::DoNotOptimize(dx.data());
  }
  set_rate(state, 2.0 * kRows * N * K);
}

void BM_BackwardWeight(benchmark::State& state) {
  const std::int64_t N = state.range(0), K = state.range(1);
  Operands o(N, K);
  std::vector<float> dw(N * K);
  for (auto _ : state) {
    linear_backward_weight_bf16(dw.data(), o.dy.data(), o.x.data(), kRows, K, N);
    benchmark::DoNotOptimize(dw.data());
  }
  set_rate(state, 2.0 * kRows * N * K);
}

// Both copies (forward and backward-input) from the fp32 weight.
void BM_Prepare(benchmark::State& state) {
  const std::int64_t N = state.range(0), K = state.range(1);
  Operands o(N, K);
  for (auto _ : state) o.prepared.prepare(o.w.data(), N, K, /*with_backward=*/true);
  state.counters["weights/s"] = benchmark::Counter(static_cast<double>(state.iterations() * N * K),
                                                   benchmark::Counter::kIsRate);
}

// 24 independent accumulators, each vdpbf16ps 64 flops (16 lanes × 2 products × 2).
__attribute__((target("avx512f,avx512bf16"))) void dot_loop(std::int64_t iterations) {
#define BERTFIT_DP(i) "vdpbf16ps %%zmm1, %%zmm0, %%zmm" #i "\n\t"
  for (std::int64_t it = 0; it < iterations; ++it) {
    asm volatile(BERTFIT_DP(4) BERTFIT_DP(5) BERTFIT_DP(6) BERTFIT_DP(7) BERTFIT_DP(8) BERTFIT_DP(9)
                     BERTFIT_DP(10) BERTFIT_DP(11) BERTFIT_DP(12) BERTFIT_DP(13) BERTFIT_DP(14)
                         BERTFIT_DP(15) BERTFIT_DP(16) BERTFIT_DP(17) BERTFIT_DP(18) BERTFIT_DP(19)
                             BERTFIT_DP(20) BERTFIT_DP(21) BERTFIT_DP(22) BERTFIT_DP(23)
                                 BERTFIT_DP(24) BERTFIT_DP(25) BERTFIT_DP(26) BERTFIT_DP(27)::
                                     : "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
                                       "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16",
                                       "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",
                                       "xmm23", "xmm24", "xmm25", "xmm26", "xmm27");
  }
#undef BERTFIT_DP
}

void BM_Bf16DotCeilingOneCore(benchmark::State& state) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16")) {
    state.SkipWithError("no AVX512_BF16 on this CPU");
    return;
  }
  constexpr std::int64_t kIterations = 1 << 20;
  for (auto _ : state) dot_loop(kIterations);
  set_rate(state, 24.0 * 64.0 * kIterations);
}

// (N, K) of DistilBERT's and BERT-base's Linears: qkv, attention output, ff1, ff2.
void shapes(benchmark::internal::Benchmark* b, bool with_prepared) {
  for (auto [N, K] : {std::pair{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}}) {
    if (with_prepared) {
      b->Args({N, K, 0});
      b->Args({N, K, 1});
    } else {
      b->Args({N, K});
    }
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_Forward)->Apply([](auto* b) { shapes(b, true); }) -> ArgNames({"N", "K", "prepared"});
BENCHMARK(BM_BackwardInput)
    ->Apply([](auto* b) { shapes(b, true); }) -> ArgNames({"N", "K", "prepared"});
BENCHMARK(BM_BackwardWeight)->Apply([](auto* b) { shapes(b, false); }) -> ArgNames({"N", "K"});
BENCHMARK(BM_Prepare)->Apply([](auto* b) { shapes(b, false); }) -> ArgNames({"N", "K"});
BENCHMARK(BM_Bf16DotCeilingOneCore)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace bertfit

BENCHMARK_MAIN();
