// The end of a training step on DistilBERT's 67.0M parameters: the clipping norm and AdamW,
// with the clipping coefficient applied as a separate pass over the gradients (torch's
// grad.mul_, what bertfit did before) against folded into AdamW (grad_scale, what it does now).
// Memory-bound: the fused form saves one read and one write of the gradients. Counter GB/s:
// bytes the variant moves per second. Compare within one run:
//   OMP_NUM_THREADS=1 build/release/bench/kernels_optimizer_bench --benchmark_repetitions=5
//     --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
// (one command line).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "base/aligned.h"
#include "base/parallel.h"
#include "kernels/optimizer.h"

namespace bertfit {
namespace {

constexpr std::int64_t kParams = 66'955'010;  // distilbert-base with its 2-label head

struct State {
  State() : p(kParams), g(kParams), m(kParams), v(kParams) {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (std::int64_t i = 0; i < kParams; ++i) p[i] = normal(rng), g[i] = normal(rng);
  }
  AlignedBuffer<float> p, g, m, v;
};

State& state_once() {
  static State s;
  return s;
}

void run(benchmark::State& bm, bool fused) {
  State& s = state_once();
  std::int64_t step = 0;
  for (auto _ : bm) {
    const double norm = std::sqrt(sum_squares(s.g.data(), kParams));
    const float coef = static_cast<float>(1.0 / (norm + 1e-6));  // < 1: clipping applies
    AdamWParams h{.lr = 2e-5, .step = ++step};
    if (fused) {
      h.grad_scale = coef;
    } else {
      float* g = s.g.data();
      parallel_for(kParams, 1 << 16, [=](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) g[i] *= coef;
      });
    }
    adamw_update(s.p.data(), s.g.data(), s.m.data(), s.v.data(), kParams, h, false);
    benchmark::ClobberMemory();
  }
  // norm: read g; scale: read + write g; AdamW: read p, g, m, v, write p, m, v.
  const double bytes = 4.0 * kParams * (fused ? 1 + 7 : 1 + 2 + 7);
  bm.counters["GB/s"] = benchmark::Counter(bytes * 1e-9 * static_cast<double>(bm.iterations()),
                                           benchmark::Counter::kIsRate);
}

void BM_ClipThenAdamW(benchmark::State& bm) { run(bm, false); }
void BM_AdamWWithClipScale(benchmark::State& bm) { run(bm, true); }
BENCHMARK(BM_ClipThenAdamW)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AdamWWithClipScale)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace bertfit

BENCHMARK_MAIN();
