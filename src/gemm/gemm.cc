// oneDNN matmul behind the gemm.h door. Primitives are created once per distinct shape, stride,
// transposition, alpha, beta and bias presence, and cached (creation costs ~0.1 ms; a training
// step calls a few dozen distinct shapes thousands of times). The cache is bounded (least
// recently used out): with unpadded execution the token count, and so a product's M or K,
// changes with every batch, and an unbounded cache would grow by a dozen primitives per step
// for the whole run. Transposed operands are expressed with strides, so no copies are made.
// A weight prepared once per update (PreparedWeightBf16) is held in the blocked layout oneDNN's
// bf16 kernels read, which they would otherwise make from a plain weight on every call; the
// bf16 weight gradient's x is laid out that way per call (reorder_b).
#include "gemm/gemm.h"

#include <algorithm>
#include <cmath>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>

#include "base/aligned.h"
#include "base/check.h"
#include "base/parallel.h"

namespace bertfit {
namespace {

using dnnl::memory;
using Dims = memory::dims;

struct Key {
  MatmulDesc d;
  bool bias;
  bool bf16;       // a and b are bf16
  bool bf16_out;   // c is bf16 (rounded to nearest even from the fp32 accumulation)
  bool prepared;   // b is a prepared weight (blocked_weights); a, b, c two-dimensional
  bool reorder_b;  // b is laid out into the primitive's preferred layout before each call
  bool int8;       // a is u8 and b a prepared s8 weight; c holds the unscaled sums as fp32
  auto tie() const {
    return std::tie(d.batch, d.M, d.N, d.K, d.trans_a, d.trans_b, d.lda, d.ldb, d.ldc, d.stride_a,
                    d.stride_b, d.stride_c, d.alpha, d.beta, bias, bf16, bf16_out, prepared,
                    reorder_b, int8);
  }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

struct Cached {
  dnnl::matmul primitive;
  memory::desc a, b, c, bias;
  // reorder_b: b as the caller holds it, and the reorder from it into `b` (a scratch buffer).
  memory::desc b_user;
  dnnl::reorder b_reorder;
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

// The layout oneDNN's matmul chooses for a (rows, cols) weight of type w_type multiplied by an
// input of type in_type, rows being the reduction: what it would otherwise copy a plain weight
// into on every call. oneDNN 2.6 here picks one layout per type pair (BA16a64b2a for bf16,
// BA16a64b4a for s8) for every M and all of the model's shapes, so it is queried once with
// M = 256 and used for any M (a primitive accepts any layout; only speed could differ).
memory::desc blocked_weights(const dnnl::engine& engine, std::int64_t rows, std::int64_t cols,
                             memory::data_type in_type, memory::data_type w_type) {
  const memory::desc src({256, rows}, in_type, memory::format_tag::ab);
  const memory::desc w({rows, cols}, w_type, memory::format_tag::any);
  const memory::desc dst({256, cols}, memory::data_type::f32, memory::format_tag::ab);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, w, dst), engine).weights_desc();
}

memory::desc blocked_bf16_weights(const dnnl::engine& engine, std::int64_t rows,
                                  std::int64_t cols) {
  return blocked_weights(engine, rows, cols, memory::data_type::bf16, memory::data_type::bf16);
}

memory::desc blocked_f32_weights(const dnnl::engine& engine, std::int64_t rows, std::int64_t cols) {
  return blocked_weights(engine, rows, cols, memory::data_type::f32, memory::data_type::f32);
}

// wq (N,K) row-major as oneDNN's (K,N) operand wqᵀ: strides (1, K).
memory::desc plain_s8_weights(std::int64_t K, std::int64_t N) {
  return memory::desc({K, N}, memory::data_type::s8, Dims{1, K});
}

memory::desc blocked_s8_weights(const dnnl::engine& engine, std::int64_t rows, std::int64_t cols) {
  return blocked_weights(engine, rows, cols, memory::data_type::u8, memory::data_type::s8);
}

Cached make_primitive(const Key& key) {
  const MatmulDesc& d = key.d;
  Cached c;
  const auto in_type = key.int8   ? memory::data_type::u8
                       : key.bf16 ? memory::data_type::bf16
                                  : memory::data_type::f32;
  const auto out_type = key.bf16_out ? memory::data_type::bf16 : memory::data_type::f32;
  if (key.prepared || key.reorder_b) {
    // Two-dimensional: oneDNN 2.6 offers its blocked weight layouts for 2-D products only (a
    // three-dimensional `any` weight comes back plain).
    CHECK(d.batch == 1, "a prepared or reordered operand in a batched product");
    auto operand2 = [](std::int64_t rows, std::int64_t cols, bool trans, std::int64_t ld,
                       memory::data_type type) {
      return memory::desc({rows, cols}, type, trans ? Dims{1, ld} : Dims{ld, 1});
    };
    c.a = operand2(d.M, d.K, d.trans_a, d.lda, in_type);
    const dnnl::engine& engine = context().engine;
    c.b = key.int8                   ? blocked_s8_weights(engine, d.K, d.N)
          : key.prepared && key.bf16 ? blocked_bf16_weights(engine, d.K, d.N)
          : key.prepared             ? blocked_f32_weights(engine, d.K, d.N)
                                     : operand2(d.K, d.N, d.trans_b, d.ldb, in_type);
    c.c = operand2(d.M, d.N, false, d.ldc, out_type);
    if (key.bias) c.bias = memory::desc({1, d.N}, memory::data_type::f32, Dims{d.N, 1});
  } else {
    c.a = operand(d.batch, d.M, d.K, d.trans_a, d.lda, d.stride_a, in_type);
    c.b = operand(d.batch, d.K, d.N, d.trans_b, d.ldb, d.stride_b, in_type);
    c.c = operand(d.batch, d.M, d.N, false, d.ldc, d.stride_c, out_type);
    if (key.bias) c.bias = memory::desc({1, 1, d.N}, memory::data_type::f32, Dims{d.N, d.N, 1});
  }
  if (key.reorder_b) {
    c.b_user = c.b;
    c.b = memory::desc(c.b.dims(), in_type, memory::format_tag::any);
  }
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
  dnnl::matmul::primitive_desc pd(desc, attr, ctx.engine);
  c.primitive = dnnl::matmul(pd);
  if (key.reorder_b) {
    c.b = pd.weights_desc();
    if (c.b != c.b_user) {
      c.b_reorder =
          dnnl::reorder(dnnl::reorder::primitive_desc(ctx.engine, c.b_user, ctx.engine, c.b));
    }
  }
  return c;
}

// prepared_b: b is held in this layout (a prepared weight), which must be the one
// make_primitive chooses for the shape.
// reorder_b: lay b out into the layout the primitive prefers (in a per-thread scratch buffer)
// before the product, for an operand oneDNN would otherwise read less efficiently.
// int8: a is u8, b a prepared s8 weight (prepared_b set), c receives the sums as fp32.
void run(const MatmulDesc& d, const void* a, const void* b, void* c, const float* bias,
         bool bf16 = false, bool bf16_out = false, const memory::desc* prepared_b = nullptr,
         bool reorder_b = false, bool int8 = false) {
  if (d.batch == 0 || d.M == 0 || d.N == 0) return;
  CHECK(d.K > 0, "matmul with K = 0");
  auto& ctx = context();
  Key key{d, bias != nullptr, bf16, bf16_out, prepared_b != nullptr, reorder_b, int8};
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
  CHECK(prepared_b == nullptr || cached.b == *prepared_b,
        "a prepared weight's layout is not the one its product expects");
  if (cached.b_reorder) {
    thread_local AlignedBuffer<std::uint8_t> scratch;
    if (scratch.size() < cached.b.get_size()) scratch.resize(cached.b.get_size());
    memory from(cached.b_user, ctx.engine, const_cast<void*>(b));
    memory to(cached.b, ctx.engine, scratch.data());
    cached.b_reorder.execute(ctx.stream, from, to);  // an in-order stream: done before the product
    b = scratch.data();
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
  // x, the weights operand here, is laid out first: measured here (4096 rows, the model's
  // shapes) the product then ran 13-20% faster, and the copy costs 2-12% of the product.
  run(backward_weight_desc(M, K, N), dy, x, dw, nullptr, true, false, nullptr,
      /*reorder_b=*/true);
}

struct PreparedWeightF32::Impl {
  std::int64_t N = 0, K = 0;
  memory::desc desc;  // the (K,N) weight of x·wᵀ, blocked
  memory data;
};

PreparedWeightF32::PreparedWeightF32() = default;
PreparedWeightF32::~PreparedWeightF32() = default;
PreparedWeightF32::PreparedWeightF32(PreparedWeightF32&&) noexcept = default;
PreparedWeightF32& PreparedWeightF32::operator=(PreparedWeightF32&&) noexcept = default;

void PreparedWeightF32::prepare(const float* w, std::int64_t N, std::int64_t K) {
  CHECK(N > 0 && K > 0, "prepared weight of shape (", N, ", ", K, ")");
  auto& ctx = context();
  if (!impl_ || impl_->N != N || impl_->K != K) {
    impl_ = std::make_unique<Impl>();
    impl_->N = N;
    impl_->K = K;
    impl_->desc = blocked_f32_weights(ctx.engine, K, N);
    impl_->data = memory(impl_->desc, ctx.engine);
  }
  // w (N,K) row-major is the (K,N) operand wᵀ with strides (1, K).
  const memory::desc from({K, N}, memory::data_type::f32, Dims{1, K});
  memory src(from, ctx.engine, const_cast<float*>(w));
  dnnl::reorder(dnnl::reorder::primitive_desc(ctx.engine, from, ctx.engine, impl_->desc))
      .execute(ctx.stream, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, impl_->data}});
  ctx.stream.wait();
}

std::int64_t PreparedWeightF32::N() const { return impl_ ? impl_->N : 0; }
std::int64_t PreparedWeightF32::K() const { return impl_ ? impl_->K : 0; }

const PreparedWeightF32::Impl& prepared_impl(const PreparedWeightF32& w) {
  CHECK(w.impl_ != nullptr, "product with a weight that was never prepared");
  return *w.impl_;
}

void linear_forward(float* y, const float* x, const PreparedWeightF32& w, const float* bias,
                    std::int64_t M) {
  const auto& p = prepared_impl(w);
  const MatmulDesc d{.M = M, .N = p.N, .K = p.K, .lda = p.K, .ldc = p.N};
  run(d, x, p.data.get_data_handle(), y, bias, false, false, &p.desc);
}

struct PreparedWeightBf16::Impl {
  // One bf16 copy of the weight in a blocked layout, and the reorder that makes it from the
  // plain fp32 weight (rounding to nearest even, as cast_f32_to_bf16).
  struct Copy {
    memory::desc from, desc;
    memory data;
    dnnl::reorder reorder;
    bool valid = false;  // made by the last prepare()
  };
  std::int64_t N = 0, K = 0;
  Copy fwd, bwd;  // fwd: the (K,N) weight of x·wᵀ; bwd: the (N,K) weight of dy·w
};

namespace {

// from: the fp32 weight viewed as the product's (rows, cols) operand.
void make_copy(PreparedWeightBf16::Impl::Copy& c, const memory::desc& from, std::int64_t rows,
               std::int64_t cols) {
  const dnnl::engine& engine = context().engine;
  c.from = from;
  c.desc = blocked_bf16_weights(engine, rows, cols);
  c.data = memory(c.desc, engine);
  c.reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine, c.from, engine, c.desc));
}

void refresh(PreparedWeightBf16::Impl::Copy& c, const float* w) {
  auto& ctx = context();
  memory src(c.from, ctx.engine, const_cast<float*>(w));
  c.reorder.execute(ctx.stream, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, c.data}});
  ctx.stream.wait();
  c.valid = true;
}

}  // namespace

PreparedWeightBf16::PreparedWeightBf16() = default;
PreparedWeightBf16::~PreparedWeightBf16() = default;
PreparedWeightBf16::PreparedWeightBf16(PreparedWeightBf16&&) noexcept = default;
PreparedWeightBf16& PreparedWeightBf16::operator=(PreparedWeightBf16&&) noexcept = default;

void PreparedWeightBf16::prepare(const float* w, std::int64_t N, std::int64_t K,
                                 bool with_backward) {
  CHECK(N > 0 && K > 0, "prepared weight of shape (", N, ", ", K, ")");
  if (!impl_ || impl_->N != N || impl_->K != K) {
    impl_ = std::make_unique<Impl>();
    impl_->N = N;
    impl_->K = K;
    // w (N,K) row-major is the (K,N) operand wᵀ with strides (1, K).
    make_copy(impl_->fwd, memory::desc({K, N}, memory::data_type::f32, Dims{1, K}), K, N);
  }
  refresh(impl_->fwd, w);
  impl_->bwd.valid = false;
  if (with_backward) {
    if (!impl_->bwd.data) {
      make_copy(impl_->bwd, memory::desc({N, K}, memory::data_type::f32, Dims{K, 1}), N, K);
    }
    refresh(impl_->bwd, w);
  }
}

std::int64_t PreparedWeightBf16::N() const { return impl_ ? impl_->N : 0; }
std::int64_t PreparedWeightBf16::K() const { return impl_ ? impl_->K : 0; }
bool PreparedWeightBf16::has_backward() const { return impl_ && impl_->bwd.valid; }

const PreparedWeightBf16::Impl& prepared_impl(const PreparedWeightBf16& w) {
  CHECK(w.impl_ != nullptr, "product with a weight that was never prepared");
  return *w.impl_;
}

namespace {

void prepared_forward(void* y, bool bf16_out, const std::uint16_t* x, const PreparedWeightBf16& w,
                      const float* bias, std::int64_t M) {
  const auto& p = prepared_impl(w);
  const MatmulDesc d{.M = M, .N = p.N, .K = p.K, .lda = p.K, .ldc = p.N};
  run(d, x, p.fwd.data.get_data_handle(), y, bias, true, bf16_out, &p.fwd.desc);
}

}  // namespace

void linear_forward_bf16(float* y, const std::uint16_t* x, const PreparedWeightBf16& w,
                         const float* bias, std::int64_t M) {
  prepared_forward(y, false, x, w, bias, M);
}

void linear_forward_bf16_out(std::uint16_t* y, const std::uint16_t* x, const PreparedWeightBf16& w,
                             const float* bias, std::int64_t M) {
  prepared_forward(y, true, x, w, bias, M);
}

void linear_backward_input_bf16(float* dx, const std::uint16_t* dy, const PreparedWeightBf16& w,
                                std::int64_t M, Output out) {
  const auto& p = prepared_impl(w);
  CHECK(p.bwd.valid, "backward product with a weight prepared without its backward copy");
  // dx (M,K) (+)= dy (M,N) · w (N,K)
  const MatmulDesc d{.M = M,
                     .N = p.K,
                     .K = p.N,
                     .lda = p.N,
                     .ldc = p.K,
                     .beta = out == Output::kAccumulate ? 1.0f : 0.0f};
  run(d, dy, p.bwd.data.get_data_handle(), dx, nullptr, true, false, &p.bwd.desc);
}

void linear_backward_input_bf16_out(std::uint16_t* dx, const std::uint16_t* dy,
                                    const PreparedWeightBf16& w, std::int64_t M) {
  const auto& p = prepared_impl(w);
  CHECK(p.bwd.valid, "backward product with a weight prepared without its backward copy");
  const MatmulDesc d{.M = M, .N = p.K, .K = p.N, .lda = p.N, .ldc = p.K};
  run(d, dy, p.bwd.data.get_data_handle(), dx, nullptr, true, true, &p.bwd.desc);
}

std::size_t gemm_cache_size() {
  auto& ctx = context();
  std::lock_guard<std::mutex> lock(ctx.mutex);
  return ctx.cache.size();
}

struct PreparedWeightInt8::Impl {
  std::int64_t N = 0, K = 0;
  AlignedBuffer<float> scale;   // (N) sw
  AlignedBuffer<float> colsum;  // (N) Σ_k wq[n,k], for the input's zero point
  memory::desc desc;            // the blocked layout of the products
  memory data;
};

PreparedWeightInt8::PreparedWeightInt8() = default;
PreparedWeightInt8::~PreparedWeightInt8() = default;
PreparedWeightInt8::PreparedWeightInt8(PreparedWeightInt8&&) noexcept = default;
PreparedWeightInt8& PreparedWeightInt8::operator=(PreparedWeightInt8&&) noexcept = default;

void PreparedWeightInt8::prepare(const float* w, std::int64_t N, std::int64_t K) {
  CHECK(N > 0 && K > 0, "prepared weight of shape (", N, ", ", K, ")");
  auto& ctx = context();
  impl_ = std::make_unique<Impl>();
  Impl& p = *impl_;
  p.N = N;
  p.K = K;
  AlignedBuffer<std::int8_t> wq(N * K);  // (N,K) row-major, until it is in the blocked layout
  p.scale.resize(N);
  p.colsum.resize(N);
  for (std::int64_t n = 0; n < N; ++n) {
    const float* row = w + n * K;
    float amax = 0;
    for (std::int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(row[k]));
    const float scale = amax > 0 ? amax / 127.0f : 1.0f;
    std::int32_t sum = 0;
    for (std::int64_t k = 0; k < K; ++k) {
      const float q = std::nearbyint(row[k] / scale);
      wq[n * K + k] = static_cast<std::int8_t>(std::clamp(q, -127.0f, 127.0f));
      sum += wq[n * K + k];
    }
    p.scale[n] = scale;
    p.colsum[n] = static_cast<float>(sum);
  }
  p.desc = blocked_s8_weights(ctx.engine, K, N);
  p.data = memory(p.desc, ctx.engine);
  memory src(plain_s8_weights(K, N), ctx.engine, wq.data());
  dnnl::reorder(dnnl::reorder::primitive_desc(ctx.engine, src.get_desc(), ctx.engine, p.desc))
      .execute(ctx.stream, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, p.data}});
  ctx.stream.wait();
}

std::int64_t PreparedWeightInt8::N() const { return impl_ ? impl_->N : 0; }
std::int64_t PreparedWeightInt8::K() const { return impl_ ? impl_->K : 0; }
std::vector<std::int8_t> PreparedWeightInt8::quantized() const {
  const Impl& p = prepared_impl(*this);
  auto& ctx = context();
  std::vector<std::int8_t> wq(static_cast<std::size_t>(p.N * p.K));
  memory dst(plain_s8_weights(p.K, p.N), ctx.engine, wq.data());
  dnnl::reorder(dnnl::reorder::primitive_desc(ctx.engine, p.desc, ctx.engine, dst.get_desc()))
      .execute(ctx.stream, {{DNNL_ARG_FROM, p.data}, {DNNL_ARG_TO, dst}});
  ctx.stream.wait();
  return wq;
}
const float* PreparedWeightInt8::scales() const { return prepared_impl(*this).scale.data(); }

const PreparedWeightInt8::Impl& prepared_impl(const PreparedWeightInt8& w) {
  CHECK(w.impl_ != nullptr, "product with a weight that was never prepared");
  return *w.impl_;
}

namespace {

// GCC 12 reports the deliberately undefined vectors inside its own AVX-512 intrinsics
// (_mm512_undefined_ps in the reductions and conversions) as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// One row of quantize_rows_u8. q = clamp(round(x / s + z)), rounding to nearest even.
void quantize_row(std::uint8_t* q, float* scale, std::int32_t* zero, const float* x,
                  std::int64_t K) {
  float lo = 0, hi = 0;  // the range includes 0, so that 0 is exact
  std::int64_t k = 0;
#if defined(__AVX512F__)
  __m512 vlo = _mm512_setzero_ps(), vhi = _mm512_setzero_ps();
  for (; k + 16 <= K; k += 16) {
    const __m512 v = _mm512_loadu_ps(x + k);
    vlo = _mm512_min_ps(vlo, v);
    vhi = _mm512_max_ps(vhi, v);
  }
  lo = _mm512_reduce_min_ps(vlo);
  hi = _mm512_reduce_max_ps(vhi);
#endif
  for (; k < K; ++k) {
    lo = std::min(lo, x[k]);
    hi = std::max(hi, x[k]);
  }
  const float s = hi > lo ? (hi - lo) / 255.0f : 1.0f;
  const float inv = 1.0f / s;
  const float z = std::clamp(std::nearbyint(-lo * inv), 0.0f, 255.0f);
  k = 0;
#if defined(__AVX512F__)
  const __m512 vinv = _mm512_set1_ps(inv), vz = _mm512_set1_ps(z);
  const __m512 v0 = _mm512_setzero_ps(), v255 = _mm512_set1_ps(255.0f);
  for (; k + 16 <= K; k += 16) {
    __m512 v = _mm512_fmadd_ps(_mm512_loadu_ps(x + k), vinv, vz);
    v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_min_ps(_mm512_max_ps(v, v0), v255);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + k),
                     _mm512_cvtusepi32_epi8(_mm512_cvtps_epu32(v)));
  }
#endif
  for (; k < K; ++k) {
    q[k] =
        static_cast<std::uint8_t>(std::clamp(std::nearbyint(std::fma(x[k], inv, z)), 0.0f, 255.0f));
  }
  *scale = s;
  *zero = static_cast<std::int32_t>(z);
}
#pragma GCC diagnostic pop

}  // namespace

void quantize_rows_u8(std::uint8_t* q, float* scale, std::int32_t* zero, const float* x,
                      std::int64_t M, std::int64_t K) {
  parallel_for(M * K, 16384, [&](std::int64_t begin, std::int64_t end) {
    // Row m belongs to the chunk holding element m·K.
    const std::int64_t first = (begin + K - 1) / K, last = (end + K - 1) / K;
    for (std::int64_t m = first; m < last; ++m)
      quantize_row(q + m * K, scale + m, zero + m, x + m * K, K);
  });
}

void quantize_rows_u8(QuantizedRows out, const float* x, std::int64_t K, std::int64_t m0,
                      std::int64_t m1) {
  quantize_rows_u8(out.q + m0 * K, out.scale + m0, out.zero + m0, x + m0 * K, m1 - m0, K);
}

namespace {

// Row blocks bound the quantized input and oneDNN's scratch to a block's worth, whatever M a
// server's batch reaches; a block of 1024 rows is far past the sizes where the products' speed
// still grows with M.
constexpr std::int64_t kInt8RowBlock = 1024;

// y (M,N) = the u8 · s8 product of x (M <= kInt8RowBlock rows), dequantized with the bias added
// in one pass, `then` on each thread's rows after it; the block's rows are rows [offset,
// offset + M) of the whole product's, as `then` numbers them.
void int8_block(float* y, QuantizedRows x, const PreparedWeightInt8& w, const float* bias,
                std::int64_t M, const RowsDone& then, std::int64_t offset) {
  const auto& p = prepared_impl(w);
  const std::int64_t K = p.K, N = p.N;
  const float* w_scale = p.scale.data();
  const float* w_colsum = p.colsum.data();
  const MatmulDesc d{.M = M, .N = N, .K = K, .lda = K, .ldc = N};
  run(d, x.q, p.data.get_data_handle(), y, nullptr, false, false, &p.desc, false, true);
  // y holds the exact sums (as fp32); dequantize and add the bias in one pass.
  parallel_for(M * N, 16384, [&](std::int64_t begin, std::int64_t end) {
    // Whole rows: row m belongs to the chunk holding element m·N (as quantize_rows_u8).
    const std::int64_t first = (begin + N - 1) / N, last = (end + N - 1) / N;
    for (std::int64_t m = first; m < last; ++m) {
      float* row = y + m * N;
      const float s = x.scale[m], z = static_cast<float>(x.zero[m]);
      for (std::int64_t n = 0; n < N; ++n) {
        const float v = s * w_scale[n] * (row[n] - z * w_colsum[n]);
        row[n] = bias != nullptr ? v + bias[n] : v;
      }
    }
    if (then && first < last) then(offset + first, offset + last);
  });
}

}  // namespace

void linear_forward_int8(float* y, const float* x, const PreparedWeightInt8& w, const float* bias,
                         std::int64_t M, const RowsDone& then) {
  const std::int64_t K = w.K(), N = w.N();
  thread_local AlignedBuffer<std::uint8_t> xq;
  thread_local AlignedBuffer<float> sx;
  thread_local AlignedBuffer<std::int32_t> zx;
  const std::int64_t rows = std::min(M, kInt8RowBlock);
  if (static_cast<std::int64_t>(xq.size()) < rows * K) xq.resize(rows * K);
  if (static_cast<std::int64_t>(sx.size()) < rows) {
    sx.resize(rows);
    zx.resize(rows);
  }
  // Pointers, not the thread_local buffers, go into the loops: other threads run them.
  const QuantizedRows q{xq.data(), sx.data(), zx.data()};
  for (std::int64_t m = 0; m < M; m += kInt8RowBlock) {
    const std::int64_t block = std::min(kInt8RowBlock, M - m);
    quantize_rows_u8(q.q, q.scale, q.zero, x + m * K, block, K);
    int8_block(y + m * N, q, w, bias, block, then, m);
  }
}

void linear_forward_int8(float* y, QuantizedRows x, const PreparedWeightInt8& w, const float* bias,
                         std::int64_t M, const RowsDone& then) {
  const std::int64_t K = w.K(), N = w.N();
  for (std::int64_t m = 0; m < M; m += kInt8RowBlock) {
    const QuantizedRows block{x.q + m * K, x.scale + m, x.zero + m};
    int8_block(y + m * N, block, w, bias, std::min(kInt8RowBlock, M - m), then, m);
  }
}

bool has_int8_vnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni") || __builtin_cpu_supports("avxvnni");
}

bool has_native_bf16() {
  // oneDNN 2.6 dispatches bf16 products to avx512_core_bf16 or AMX kernels when the CPU has
  // the instructions; otherwise it converts in software.
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16");
}

}  // namespace bertfit
