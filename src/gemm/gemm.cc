// oneDNN matmul behind the gemm.h door. Primitives are created once per distinct shape, stride,
// transposition, alpha, beta and bias presence, and cached (creation costs ~0.1 ms; a training
// step calls a few dozen distinct shapes thousands of times). The cache is bounded (least
// recently used out): with unpadded execution the token count, and so a product's M or K,
// changes with every batch, and an unbounded cache would grow by a dozen primitives per step
// for the whole run. Transposed operands are expressed with strides, so no copies are made.
#include "gemm/gemm.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>

#include "base/check.h"

namespace bertfit {
namespace {

using dnnl::memory;
using Dims = memory::dims;

struct Key {
  MatmulDesc d;
  bool bias;
  bool bf16;      // a and b are bf16
  bool bf16_out;  // c is bf16 (rounded to nearest even from the fp32 accumulation)
  auto tie() const {
    return std::tie(d.batch, d.M, d.N, d.K, d.trans_a, d.trans_b, d.lda, d.ldb, d.ldc, d.stride_a,
                    d.stride_b, d.stride_c, d.alpha, d.beta, bias, bf16, bf16_out);
  }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

struct Cached {
  dnnl::matmul primitive;
  memory::desc a, b, c, bias;
  std::uint64_t last_use = 0;
};

struct Context {
  Context() {
    // oneDNN keeps its own cache of primitive implementations (1024 by default); ours holds
    // what is in use, so keep oneDNN's no larger.
    dnnl::set_primitive_cache_capacity(static_cast<int>(kGemmCacheCapacity));
  }
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Key, Cached> cache;
  std::uint64_t uses = 0;
  std::mutex mutex;
};

Context& context() {
  static Context ctx;
  return ctx;
}

// A (batch, rows, cols) operand stored row-major with leading dimension ld, or its transpose
// (stored (batch, cols, rows)) when trans.
memory::desc operand(std::int64_t batch, std::int64_t rows, std::int64_t cols, bool trans,
                     std::int64_t ld, std::int64_t stride,
                     memory::data_type type = memory::data_type::f32) {
  Dims dims{batch, rows, cols};
  Dims strides = trans ? Dims{stride, 1, ld} : Dims{stride, ld, 1};
  return memory::desc(dims, type, strides);
}

Cached make_primitive(const Key& key) {
  const MatmulDesc& d = key.d;
  Cached c;
  const auto in_type = key.bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  c.a = operand(d.batch, d.M, d.K, d.trans_a, d.lda, d.stride_a, in_type);
  c.b = operand(d.batch, d.K, d.N, d.trans_b, d.ldb, d.stride_b, in_type);
  c.c = operand(d.batch, d.M, d.N, false, d.ldc, d.stride_c,
                key.bf16_out ? memory::data_type::bf16 : memory::data_type::f32);
  if (key.bias) c.bias = memory::desc({1, 1, d.N}, memory::data_type::f32, Dims{d.N, d.N, 1});
  dnnl::primitive_attr attr;
  if (d.alpha != 1.0f) attr.set_output_scales(0, {d.alpha});
  if (d.beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(d.beta);
    attr.set_post_ops(ops);
  }
  auto& ctx = context();
  dnnl::matmul::desc desc =
      key.bias ? dnnl::matmul::desc(c.a, c.b, c.bias, c.c) : dnnl::matmul::desc(c.a, c.b, c.c);
  c.primitive = dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, ctx.engine));
  return c;
}

void run(const MatmulDesc& d, const void* a, const void* b, void* c, const float* bias,
         bool bf16 = false, bool bf16_out = false) {
  if (d.batch == 0 || d.M == 0 || d.N == 0) return;
  CHECK(d.K > 0, "matmul with K = 0");
  auto& ctx = context();
  Key key{d, bias != nullptr, bf16, bf16_out};
  Cached cached;  // a copy (handles): another thread may evict the entry meanwhile
  {
    std::lock_guard<std::mutex> lock(ctx.mutex);
    auto it = ctx.cache.find(key);
    if (it == ctx.cache.end()) {
      if (ctx.cache.size() >= kGemmCacheCapacity) {
        auto oldest = std::min_element(ctx.cache.begin(), ctx.cache.end(), [](auto& x, auto& y) {
          return x.second.last_use < y.second.last_use;
        });
        ctx.cache.erase(oldest);
      }
      it = ctx.cache.emplace(key, make_primitive(key)).first;
    }
    it->second.last_use = ++ctx.uses;
    cached = it->second;
  }
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, memory(cached.a, ctx.engine, const_cast<void*>(a))},
      {DNNL_ARG_WEIGHTS, memory(cached.b, ctx.engine, const_cast<void*>(b))},
      {DNNL_ARG_DST, memory(cached.c, ctx.engine, c)}};
  if (bias != nullptr) {
    args.emplace(DNNL_ARG_BIAS, memory(cached.bias, ctx.engine, const_cast<float*>(bias)));
  }
  cached.primitive.execute(ctx.stream, args);
  ctx.stream.wait();
}

}  // namespace

void matmul(const MatmulDesc& d, const float* a, const float* b, float* c) {
  run(d, a, b, c, nullptr);
}

namespace {

// The three Linear products as MatmulDescs (row-major, w stored (N,K) as PyTorch).
MatmulDesc forward_desc(std::int64_t M, std::int64_t K, std::int64_t N) {
  // y (M,N) = x (M,K) · wᵀ
  return {.M = M,
          .N = N,
          .K = K,
          .trans_b = true,
          .lda = K,
          .ldb = K,
          .ldc = N,
          .stride_a = M * K,
          .stride_b = N * K,
          .stride_c = M * N};
}
MatmulDesc backward_input_desc(std::int64_t M, std::int64_t K, std::int64_t N, Output out) {
  // dx (M,K) += dy (M,N) · w (N,K), or = when out is kOverwrite
  return {.M = M,
          .N = K,
          .K = N,
          .lda = N,
          .ldb = K,
          .ldc = K,
          .stride_a = M * N,
          .stride_b = N * K,
          .stride_c = M * K,
          .beta = out == Output::kAccumulate ? 1.0f : 0.0f};
}
MatmulDesc backward_weight_desc(std::int64_t M, std::int64_t K, std::int64_t N) {
  // dw (N,K) += dyᵀ (N,M) · x (M,K), dy stored (M,N)
  return {.M = N,
          .N = K,
          .K = M,
          .trans_a = true,
          .lda = N,
          .ldb = K,
          .ldc = K,
          .stride_a = M * N,
          .stride_b = M * K,
          .stride_c = N * K,
          .beta = 1.0f};
}

}  // namespace

void linear_forward(float* y, const float* x, const float* w, const float* bias, std::int64_t M,
                    std::int64_t K, std::int64_t N) {
  run(forward_desc(M, K, N), x, w, y, bias);
}

void linear_backward_input(float* dx, const float* dy, const float* w, std::int64_t M,
                           std::int64_t K, std::int64_t N, Output out) {
  run(backward_input_desc(M, K, N, out), dy, w, dx, nullptr);
}

void linear_backward_weight(float* dw, const float* dy, const float* x, std::int64_t M,
                            std::int64_t K, std::int64_t N) {
  run(backward_weight_desc(M, K, N), dy, x, dw, nullptr);
}

void linear_forward_bf16(float* y, const std::uint16_t* x, const std::uint16_t* w,
                         const float* bias, std::int64_t M, std::int64_t K, std::int64_t N) {
  run(forward_desc(M, K, N), x, w, y, bias, true);
}

void linear_forward_bf16_out(std::uint16_t* y, const std::uint16_t* x, const std::uint16_t* w,
                             const float* bias, std::int64_t M, std::int64_t K, std::int64_t N) {
  run(forward_desc(M, K, N), x, w, y, bias, true, true);
}

void linear_backward_input_bf16(float* dx, const std::uint16_t* dy, const std::uint16_t* w,
                                std::int64_t M, std::int64_t K, std::int64_t N, Output out) {
  run(backward_input_desc(M, K, N, out), dy, w, dx, nullptr, true);
}

void linear_backward_weight_bf16(float* dw, const std::uint16_t* dy, const std::uint16_t* x,
                                 std::int64_t M, std::int64_t K, std::int64_t N) {
  run(backward_weight_desc(M, K, N), dy, x, dw, nullptr, true);
}

std::size_t gemm_cache_size() {
  auto& ctx = context();
  std::lock_guard<std::mutex> lock(ctx.mutex);
  return ctx.cache.size();
}

bool has_native_bf16() {
  // oneDNN 2.6 dispatches bf16 products to avx512_core_bf16 or AMX kernels when the CPU has
  // the instructions; otherwise it converts in software.
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16");
}

}  // namespace bertfit
