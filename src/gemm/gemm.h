// The only door to oneDNN: fp32 (and later bf16-input) matrix products with cached primitives.
// All matrices are row-major. Letters: M rows of activations, K input features, N outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

namespace bertfit {

// y (M,N) = x (M,K) · wᵀ + bias, with w (N,K) as a PyTorch Linear weight; bias (N) or nullptr.
void linear_forward(float* y, const float* x, const float* w, const float* bias, std::int64_t M,
                    std::int64_t K, std::int64_t N);

// How a product's output meets what dx holds: summed onto it, or written over it (no need to
// zero dx first, and the product does not read it).
enum class Output { kAccumulate, kOverwrite };

// dx (M,K) += dy (M,N) · w (N,K)  (or = with Output::kOverwrite).
void linear_backward_input(float* dx, const float* dy, const float* w, std::int64_t M,
                           std::int64_t K, std::int64_t N, Output out = Output::kAccumulate);

// dw (N,K) += dyᵀ (N,M) · x (M,K).
void linear_backward_weight(float* dw, const float* dy, const float* x, std::int64_t M,
                            std::int64_t K, std::int64_t N);

// General strided batched product: for b in [0, batch):
//   c_b (M,N) = alpha · op(a_b) · op(b_b) + beta · c_b
// where op(a) is (M,K) (or its transpose stored (K,M) when trans_a), op(b) is (K,N) (stored
// (N,K) when trans_b). lda/ldb/ldc are row strides; stride_* the batch strides, in floats.
struct MatmulDesc {
  std::int64_t batch = 1, M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false;
  std::int64_t lda = 0, ldb = 0, ldc = 0;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  float alpha = 1.0f, beta = 0.0f;
};
void matmul(const MatmulDesc& d, const float* a, const float* b, float* c);

// Mixed precision: bf16 inputs (stored as the upper 16 bits of an fp32, see base/dtype.h)
// with fp32 accumulation and fp32 output, the same shapes and semantics as the fp32 versions.
void linear_forward_bf16(float* y, const std::uint16_t* x, const std::uint16_t* w,
                         const float* bias, std::int64_t M, std::int64_t K, std::int64_t N);
// The same with a bf16 output y = bf16(x·wᵀ + b), rounded to nearest even once from the fp32
// sum: for a product whose output only feeds bf16 consumers (half the bytes written and kept).
void linear_forward_bf16_out(std::uint16_t* y, const std::uint16_t* x, const std::uint16_t* w,
                             const float* bias, std::int64_t M, std::int64_t K, std::int64_t N);
void linear_backward_input_bf16(float* dx, const std::uint16_t* dy, const std::uint16_t* w,
                                std::int64_t M, std::int64_t K, std::int64_t N,
                                Output out = Output::kAccumulate);
void linear_backward_weight_bf16(float* dw, const std::uint16_t* dy, const std::uint16_t* x,
                                 std::int64_t M, std::int64_t K, std::int64_t N);

// A Linear weight w (N,K), rounded to bf16 and stored the way oneDNN's bf16 kernels read
// weights (blocked, with pairs along the reduction interleaved), so that a product need not
// lay it out again on every call: one copy for forward products (x·wᵀ) and, on request, one
// for backward-input products (dy·w). prepare() makes both from the fp32 weight in one pass
// each (round to nearest even and lay out), once per weight update; the products below then
// read it for any M, faster than from a plain bf16 weight (docs/DESIGN.md, "Measurements", training
// step; "Prepared bf16 weights").
class PreparedWeightBf16 {
 public:
  PreparedWeightBf16();
  ~PreparedWeightBf16();
  PreparedWeightBf16(PreparedWeightBf16&&) noexcept;
  PreparedWeightBf16& operator=(PreparedWeightBf16&&) noexcept;

  // w: (N,K) fp32, row-major. with_backward: also the backward-input copy (for training).
  void prepare(const float* w, std::int64_t N, std::int64_t K, bool with_backward);
  std::int64_t N() const;
  std::int64_t K() const;
  bool has_backward() const;
  struct Impl;  // gemm.cc's

 private:
  std::unique_ptr<Impl> impl_;
  friend const Impl& prepared_impl(const PreparedWeightBf16& w);
};

// The Linear products above from a prepared weight (K and N are w's).
void linear_forward_bf16(float* y, const std::uint16_t* x, const PreparedWeightBf16& w,
                         const float* bias, std::int64_t M);
void linear_forward_bf16_out(std::uint16_t* y, const std::uint16_t* x, const PreparedWeightBf16& w,
                             const float* bias, std::int64_t M);
// Needs w prepared with_backward.
void linear_backward_input_bf16(float* dx, const std::uint16_t* dy, const PreparedWeightBf16& w,
                                std::int64_t M, Output out = Output::kAccumulate);
// The same written as bf16, dx = bf16(dy·w) rounded once from the fp32 sum: for an input
// gradient only a bf16 consumer reads (the activation's backward before ff1).
void linear_backward_input_bf16_out(std::uint16_t* dx, const std::uint16_t* dy,
                                    const PreparedWeightBf16& w, std::int64_t M);

// A Linear weight w (N,K) in fp32 laid out once the way oneDNN's fp32 kernels read weights
// (blocked), for inference: from a plain weight, every product first copies the weight into
// that layout itself, which at a few rows costs about as much as the product
// (docs/DESIGN.md, "Measurements", inference). Forward products only; the values are w's,
// so the products' results are those of linear_forward up to the order of the sums.
class PreparedWeightF32 {
 public:
  PreparedWeightF32();
  ~PreparedWeightF32();
  PreparedWeightF32(PreparedWeightF32&&) noexcept;
  PreparedWeightF32& operator=(PreparedWeightF32&&) noexcept;

  // w: (N,K) fp32, row-major.
  void prepare(const float* w, std::int64_t N, std::int64_t K);
  std::int64_t N() const;
  std::int64_t K() const;
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  friend const Impl& prepared_impl(const PreparedWeightF32& w);
};

// y (M,N) = x (M,K) · wᵀ + bias (bias may be null) from a prepared fp32 weight.
void linear_forward(float* y, const float* x, const PreparedWeightF32& w, const float* bias,
                    std::int64_t M);

// int8 inference products. The weight w (N,K) is quantized once, symmetric per output channel
// (wq = round(w / sw[n]), sw[n] = max|w[n,:]| / 127, in [-127, 127]), and held in the blocked
// layout oneDNN's VNNI kernels read. Each product quantizes its input x (M,K) per row,
// asymmetric to u8 (the row's range, widened to include 0, mapped onto [0, 255]: x ≈ sx[m] ·
// (q - zx[m])); oneDNN multiplies u8 by s8 on VNNI with exact int32 sums, and one pass after
// it dequantizes and adds the bias: y = sx[m] · sw[n] · (acc - zx[m] · Σ_k wq[n,k]) + b[n].
// Why per row and u8 (docs/DESIGN.md, "int8 inference"): oneDNN 2.6 runs u8 · s8 products
// with plain int32 or fp32 output on its fast VNNI kernels, but falls back to slow ones as soon
// as runtime scales, zero points or per-row post-ops are attached, so the dequantization is
// ours, and per-row scales then cost nothing over per-tensor ones while fitting each token.
class PreparedWeightInt8 {
 public:
  PreparedWeightInt8();
  ~PreparedWeightInt8();
  PreparedWeightInt8(PreparedWeightInt8&&) noexcept;
  PreparedWeightInt8& operator=(PreparedWeightInt8&&) noexcept;

  // w: (N,K) fp32, row-major.
  void prepare(const float* w, std::int64_t N, std::int64_t K);
  std::int64_t N() const;
  std::int64_t K() const;
  // The quantized weight as the products use it: wq (N,K) row-major (copied back out of the
  // blocked layout, which is all that is kept) and sw (N).
  std::vector<std::int8_t> quantized() const;
  const float* scales() const;
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  friend const Impl& prepared_impl(const PreparedWeightInt8& w);
};

// Rows quantized as linear_forward_int8 quantizes its input: q (M,K) u8, and per row the scale
// and the zero point (x ≈ scale[m] · (q - zero[m])).
struct QuantizedRows {
  std::uint8_t* q = nullptr;
  float* scale = nullptr;
  std::int32_t* zero = nullptr;
};

// What runs on rows [m0, m1) of a product's output once they are final: called by the threads
// of the product's last pass, each on its own rows (an epilogue fused into that pass). A
// reference to a callable `void(std::int64_t m0, std::int64_t m1)` that outlives the call it is
// passed to (a lambda written in the call's arguments does); empty by default. It neither owns
// nor allocates: products run per request in a server.
class RowsDone {
 public:
  RowsDone() = default;
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, RowsDone>)
      RowsDone(const F& f)  // NOLINT(google-explicit-constructor): a lambda converts implicitly
      : object_(&f), call_([](const void* o, std::int64_t m0, std::int64_t m1) {
          (*static_cast<const F*>(o))(m0, m1);
        }) {}
  explicit operator bool() const { return call_ != nullptr; }
  void operator()(std::int64_t m0, std::int64_t m1) const { call_(object_, m0, m1); }

 private:
  const void* object_ = nullptr;
  void (*call_)(const void*, std::int64_t, std::int64_t) = nullptr;
};

// y (M,N) = x (M,K) · wᵀ + bias (bias may be null), as described above. Needs has_int8_vnni().
// `then`, when set, runs on each thread's rows of y in the dequantization's parallel region,
// right after they are dequantized (the kernels it calls run on that thread alone).
void linear_forward_int8(float* y, const float* x, const PreparedWeightInt8& w, const float* bias,
                         std::int64_t M, const RowsDone& then = {});
// The same from x already quantized (quantize_rows_u8), as an epilogue of the kernel that made
// x can do while x's rows are in cache.
void linear_forward_int8(float* y, QuantizedRows x, const PreparedWeightInt8& w, const float* bias,
                         std::int64_t M, const RowsDone& then = {});

// x (M,K) quantized per row as linear_forward_int8 does: q (M,K), scale (M), zero point (M).
void quantize_rows_u8(std::uint8_t* q, float* scale, std::int32_t* zero, const float* x,
                      std::int64_t M, std::int64_t K);
// The same for rows [m0, m1) of x into the same rows of out.
void quantize_rows_u8(QuantizedRows out, const float* x, std::int64_t K, std::int64_t m0,
                      std::int64_t m1);

// True when the CPU has VNNI (AVX512_VNNI or AVX_VNNI), which int8 products need: without it
// oneDNN's u8 · s8 kernels sum pairs in saturating 16-bit arithmetic (wrong for some inputs)
// or run slower than bf16, so callers refuse int8 instead.
bool has_int8_vnni();

// True when oneDNN runs bf16 products natively on this CPU (AVX512_BF16 or AMX); without it
// bf16 would be emulated and slower than fp32, so callers fall back to fp32.
bool has_native_bf16();

// Primitives are cached per distinct product (shape, strides, dtype...), at most this many,
// least recently used out; gemm_cache_size() is how many are held now.
inline constexpr std::size_t kGemmCacheCapacity = 256;
std::size_t gemm_cache_size();

// Threads used by oneDNN follow OpenMP (base/parallel.h).

}  // namespace bertfit
