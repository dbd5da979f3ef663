// Multi-head attention forward/backward on a fused QKV buffer, one (batch, head) pair per
// task, tasks handed to threads dynamically (their cost follows the sequence's length). The six
// products per head (scores, P·V; dV, dP, dQ, dK) run through the register-blocked small_gemm over
// strided views of fp32 QKV rows, or through small_gemm_bf16 on bf16 operands packed from bf16 QKV
// rows; softmax, dropout and dS = P ⊙ (dP - r) are fp32 row loops between them (the bf16
// forward writes P̃'s bf16 operand directly). Dropout on the probabilities uses the
// counter-based mask of dropout.h.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "base/check.h"
#include "base/dtype.h"
#include "base/parallel.h"
#include "kernels/attention_internal.h"
#include "kernels/cast.h"
#include "kernels/dropout_internal.h"
#include "kernels/small_gemm.h"
#include "kernels/vmath.h"

namespace bertfit {
namespace {

using detail::Dropout;
using detail::dropped_probs;
using detail::grow;
using detail::make_dropout;
using detail::masked_softmax;
using detail::round_up16;
using detail::softmax_backward_rows;
using detail::thread_scratch;

// Addresses one (b, h) task's slices of a (T, 3C) sequence block: q, k, v rows of head h,
// read in place from the fused QKV rows (fp32, or bf16 bits for the bf16 path); outputs (out,
// dqkv) are addressed through C and channel.
template <class E>
struct Head {
  int T, C, D;
  const std::int32_t* mask;  // (T) of sequence b
  std::int64_t channel;      // h · D
  int kend;                  // keys [kend, T) are padding (probability 0): skipped
  int qend;                  // query rows computed: [0, qend)
  bool any_real;             // some key is real (else HF's rows are uniform over all T)
  const E* src;              // row 0 of this head's q; k at +C, v at +2C; rows 3C apart
  std::int64_t row() const { return 3 * static_cast<std::int64_t>(C); }
  const E* q(int i) const { return src + i * row(); }
  const E* k(int j) const { return src + j * row() + C; }
  const E* v(int j) const { return src + j * row() + 2 * static_cast<std::int64_t>(C); }
};

template <class E>
Head<E> make_head(const AttentionShape& s, const E* qkv, const std::int32_t* mask, int b, int h) {
  const int D = s.C / s.H;
  const std::int32_t* m = mask + static_cast<std::int64_t>(b) * s.T;
  int kend = s.T;
  while (kend > 0 && m[kend - 1] == 0) --kend;
  const bool any_real = kend > 0;
  if (!any_real) kend = s.T;  // uniform rows over every key
  int qend = s.skip_padding_queries ? kend : s.T;
  if (s.max_queries > 0) qend = std::min(qend, s.max_queries);
  const std::int64_t channel = static_cast<std::int64_t>(h) * D;
  return Head<E>{s.T,  s.C,      D,
                 m,    channel,  kend,
                 qend, any_real, qkv + static_cast<std::int64_t>(b) * s.T * 3 * s.C + channel};
}

// Per-thread scratch of one (sequence, head) task. Column counts of key-indexed buffers are
// rounded up to 16 (Kp) and the padding columns of kt / vt kept zero, so the products over keys
// run on whole vectors.
struct Scratch {
  std::vector<float> qs;           // (T, D) q / √D
  std::vector<float> kt;           // (D, Kp) kᵀ (forward) or vᵀ (backward)
  std::vector<float> s;            // (T, Kp) scores (forward), dP then dS (backward)
  std::vector<float> pd;           // (T, Kp) probabilities after dropout
  std::vector<std::uint8_t> keep;  // (T, Kp) dropout's keep mask (1 = kept)
  void ensure(int T, int D) {
    grow(qs, static_cast<std::size_t>(T) * D);
    grow(kt, static_cast<std::size_t>(D) * round_up16(T));
    grow(s, static_cast<std::size_t>(T) * round_up16(T));
    grow(pd, static_cast<std::size_t>(T) * round_up16(T));
    grow(keep, static_cast<std::size_t>(T) * round_up16(T));
  }
};

// Query row i's probabilities from its scores (K keys), then zeros to T: over the real keys,
// or with a window over the real keys within it.
template <class HeadT>
void softmax_row(float* pi, const float* scores, const HeadT& hd, int i, int window) {
  const int K = hd.kend;
  if (window < 0) {
    masked_softmax(pi, scores, hd.mask, K, hd.any_real);
  } else {
    const int lo = std::min(std::max(0, i - window), K);
    const int hi = std::max(lo, std::min(K, i + window + 1));
    bool any = false;
    for (int j = lo; j < hi && !any; ++j) any = hd.mask[j] != 0;
    if (!any) {  // past the sequence's end: a row the caller discards, finite
      masked_softmax(pi, scores, hd.mask, K, hd.any_real);
    } else {
      std::fill(pi, pi + lo, 0.0f);
      masked_softmax(pi + lo, scores + lo, hd.mask + lo, hi - lo, true);
      std::fill(pi + hi, pi + K, 0.0f);
    }
  }
  std::fill(pi + K, pi + hd.T, 0.0f);
}

void scaled_queries(const Head<float>& hd, float sqrt_d, Scratch& sc) {
  for (int i = 0; i < hd.qend; ++i) {
    const float* qi = hd.q(i);
    float* o = sc.qs.data() + static_cast<std::size_t>(i) * hd.D;
    for (int d = 0; d < hd.D; ++d) o[d] = qi[d] / sqrt_d;  // HF: q = q / math.sqrt(D)
  }
}

// kt (D, Kp) = rows [0, K) of x (k or v of this head) transposed, zero past K.
template <class RowFn>
void transpose_keys(const Head<float>& hd, int Kp, RowFn row, Scratch& sc) {
  const int K = hd.kend, D = hd.D;
  for (int j = 0; j < K; ++j) {
    const float* xj = row(j);
    for (int d = 0; d < D; ++d) sc.kt[static_cast<std::size_t>(d) * Kp + j] = xj[d];
  }
  for (int d = 0; d < D; ++d) {
    std::fill_n(sc.kt.data() + static_cast<std::size_t>(d) * Kp + K, Kp - K, 0.0f);
  }
}

// out: the first row of sequence b; probs: this head's (T,T) block.
void head_forward(float* out, float* probs, const Head<float>& hd, const Dropout& drop,
                  float sqrt_d, int window, Scratch& sc) {
  const int T = hd.T, D = hd.D, K = hd.kend, Q = hd.qend, Kp = round_up16(K);
  scaled_queries(hd, sqrt_d, sc);
  transpose_keys(
      hd, Kp, [&](int j) { return hd.k(j); }, sc);
  // S (Q, Kp) = (q / √D) · kᵀ
  detail::small_gemm(Q, Kp, D, 1.0f, sc.qs.data(), D, 1, sc.kt.data(), Kp, sc.s.data(), Kp, false);
  for (int i = 0; i < Q; ++i) {
    float* pi = probs + static_cast<std::int64_t>(i) * T;
    softmax_row(pi, sc.s.data() + static_cast<std::size_t>(i) * Kp, hd, i, window);
  }
  // out (Q, D) = dropout(P) · v
  const auto [p, ldp] = dropped_probs(probs, hd, drop, Kp, sc);
  detail::small_gemm(Q, D, K, 1.0f, p, ldp, 1, hd.v(0), hd.row(), out + hd.channel, hd.C, false);
}

// Zeroes rows [from, T) of a head's D columns at c (row stride `row`): the rows of dQ past the
// computed queries and of dK, dV past the real keys, whose gradient is 0 (the backward writes
// every element of dqkv, so nobody zeroes it first).
void zero_rows(float* c, std::ptrdiff_t row, int from, int T, int D) {
  for (int i = from; i < T; ++i) std::fill_n(c + i * row, D, 0.0f);
}

// dqkv, dout: the first row of sequence b; probs: this head's (T,T) block.
void head_backward(float* dqkv, const float* dout, const float* probs, const Head<float>& hd,
                   const Dropout& drop, float sqrt_d, Scratch& sc) {
  const int D = hd.D, K = hd.kend, Q = hd.qend, Kp = round_up16(K);
  const std::ptrdiff_t row = hd.row();
  const float* dO = dout + hd.channel;
  scaled_queries(hd, sqrt_d, sc);
  transpose_keys(
      hd, Kp, [&](int j) { return hd.v(j); }, sc);
  const auto [p, ldp] = dropped_probs(probs, hd, drop, Kp, sc);
  // dV (K, D) = dropout(P)ᵀ · dO
  detail::small_gemm(K, D, Q, 1.0f, p, 1, ldp, dO, hd.C, dqkv + 2 * hd.C + hd.channel, row, false);
  // dP_drop (Q, Kp) = dO · vᵀ
  float* ds = sc.s.data();
  detail::small_gemm(Q, Kp, D, 1.0f, dO, hd.C, 1, sc.kt.data(), Kp, ds, Kp, false);
  softmax_backward_rows(ds, Kp, probs, hd, drop, sc.keep.data());
  // dQ (Q, D) = dS · k / √D;  dK (K, D) = dSᵀ · (q / √D)
  detail::small_gemm(Q, D, K, 1.0f / sqrt_d, ds, Kp, 1, hd.k(0), hd.row(), dqkv + hd.channel, row,
                     false);
  detail::small_gemm(K, D, Q, 1.0f, ds, 1, Kp, sc.qs.data(), D, dqkv + hd.C + hd.channel, row,
                     false);
  zero_rows(dqkv + hd.channel, row, Q, hd.T, D);
  zero_rows(dqkv + hd.C + hd.channel, row, K, hd.T, D);
  zero_rows(dqkv + 2 * hd.C + hd.channel, row, K, hd.T, D);
}

// ---- bf16 QKV: the six products on bf16 operands with fp32 accumulation (small_gemm_bf16).
// q, k, v are read as they are; the operands computed here (the dropped probabilities P̃, dO and
// dS) are rounded to bf16 for their products, as under PyTorch's autocast; softmax, dropout
// and dS = P ⊙ (dP - r) stay in fp32. Scores are (q · kᵀ) · (1/√D) (the fp32 path scales q
// first: the same to within one rounding). Every product's K (a count of keys, queries or
// channels) is padded to even with zeros; operand layouts in small_gemm.h. Transposed
// operands (P̃ᵀ, dSᵀ) are read as A from pack_pairs' output, which interleaves pairs of rows.

int round_up2(int n) { return n + n % 2; }

// dst[j] = bf16(P̃ij) for j < K (P̃ = P · keep / (1-p), or P without dropout), and a zero at
// j = K when K is odd: the row of A that pack_rows would make from dropped_probs' output, in
// one pass (the same values bit for bit). i_row: element (i, 0)'s index in the dropout mask.
void dropped_row_bf16(std::uint16_t* dst, const float* p, const Dropout& drop, std::uint64_t i_row,
                      int K) {
  if (drop.active) {
    detail::drop_each(p, K, i_row, drop.threshold, drop.scale, drop.key,
                      [dst](std::int64_t j, float v) { dst[j] = f32_to_bf16(v); });
  } else {
    for (int j = 0; j < K; ++j) dst[j] = f32_to_bf16(p[j]);
  }
  if (K % 2 != 0) dst[K] = 0;
}

struct ScratchBf16 {
  std::vector<float> pd;           // (T, Kp) fp32 P̃ = dropout(P) (see dropped_probs)
  std::vector<std::uint8_t> keep;  // (T, Kp) dropout's keep mask (1 = kept)
  std::vector<std::uint16_t> a;    // row-major A operand: q (odd D), P̃, dO, dS
  std::vector<std::uint32_t> at;   // pairs of rows of P̃ or dS, read as A = P̃ᵀ or dSᵀ
  std::vector<std::uint32_t> b;    // B operand
  std::vector<float> s;            // (T, Kp) scores (forward), dP then dS (backward)
  void ensure(int T, int D) {
    grow(pd, static_cast<std::size_t>(T) * round_up16(T));
    grow(keep, static_cast<std::size_t>(T) * round_up16(T));
    grow(a, static_cast<std::size_t>(T) * std::max(round_up2(T), round_up2(D)));
    grow(at, static_cast<std::size_t>(round_up2(T) / 2) * round_up16(T));
    grow(b, std::max(static_cast<std::size_t>(round_up2(D) / 2) * round_up16(T),
                     static_cast<std::size_t>(round_up2(T) / 2) * round_up16(D)));
    grow(s, static_cast<std::size_t>(T) * round_up16(T));
  }
};

void head_forward_bf16(float* out, float* probs, const Head<std::uint16_t>& hd, const Dropout& drop,
                       float sqrt_d, int window, ScratchBf16& sc) {
  const int T = hd.T, D = hd.D, K = hd.kend, Q = hd.qend, Kp = round_up16(K);
  const int De = round_up2(D), Ke = round_up2(K), Dp = round_up16(D);
  // S (Q, K) = q · kᵀ / √D; q is an A operand in place unless D is odd.
  detail::BF16Pairs qa{hd.q(0), hd.row(), 2};
  if (D != De) {
    detail::pack_rows(sc.a.data(), De, hd.q(0), hd.row(), Q, D);
    qa = {sc.a.data(), De, 2};
  }
  detail::pack_pairs_within_rows(sc.b.data(), Kp, hd.k(0), hd.row(), D, K);
  detail::small_gemm_bf16(Q, K, De / 2, 1.0f / sqrt_d, qa, sc.b.data(), Kp, sc.s.data(), Kp, false);
  // Each row's probabilities, and while the row is in L1 its P̃ = dropout(P) as a bf16 A row.
  for (int i = 0; i < Q; ++i) {
    float* pi = probs + static_cast<std::int64_t>(i) * T;
    softmax_row(pi, sc.s.data() + static_cast<std::size_t>(i) * Kp, hd, i, window);
    dropped_row_bf16(sc.a.data() + static_cast<std::size_t>(i) * Ke, pi, drop,
                     drop.base + static_cast<std::uint64_t>(i) * T, K);
  }
  // out (Q, D) = P̃ · v
  detail::pack_pairs(sc.b.data(), Dp, hd.v(0), hd.row(), K, D);
  detail::small_gemm_bf16(Q, D, Ke / 2, 1.0f, {sc.a.data(), Ke, 2}, sc.b.data(), Dp,
                          out + hd.channel, hd.C, false);
}

void head_backward_bf16(float* dqkv, const float* dout, const float* probs,
                        const Head<std::uint16_t>& hd, const Dropout& drop, float sqrt_d,
                        ScratchBf16& sc) {
  const int D = hd.D, K = hd.kend, Q = hd.qend, Kp = round_up16(K);
  const int De = round_up2(D), Ke = round_up2(K), Qe = round_up2(Q), Dp = round_up16(D);
  const std::ptrdiff_t row = hd.row();
  const float* dO = dout + hd.channel;
  std::uint16_t* a = sc.a.data();
  std::uint32_t* b = sc.b.data();
  const detail::BF16Pairs at{sc.at.data(), 2, 2 * static_cast<std::ptrdiff_t>(Kp)};
  // dV (K, D) = P̃ᵀ · dO
  const auto [p, ldp] = dropped_probs(probs, hd, drop, Kp, sc);
  detail::pack_pairs(sc.at.data(), Kp, p, ldp, Q, K);
  detail::pack_pairs(b, Dp, dO, hd.C, Q, D);
  detail::small_gemm_bf16(K, D, Qe / 2, 1.0f, at, b, Dp, dqkv + 2 * hd.C + hd.channel, row, false);
  // dP_drop (Q, K) = dO · vᵀ
  float* ds = sc.s.data();
  detail::pack_rows(a, De, dO, hd.C, Q, D);
  detail::pack_pairs_within_rows(b, Kp, hd.v(0), row, D, K);
  detail::small_gemm_bf16(Q, K, De / 2, 1.0f, {a, De, 2}, b, Kp, ds, Kp, false);
  softmax_backward_rows(ds, Kp, probs, hd, drop, sc.keep.data());
  // dQ (Q, D) = dS · k / √D
  detail::pack_rows(a, Ke, ds, Kp, Q, K);
  detail::pack_pairs(b, Dp, hd.k(0), row, K, D);
  detail::small_gemm_bf16(Q, D, Ke / 2, 1.0f / sqrt_d, {a, Ke, 2}, b, Dp, dqkv + hd.channel, row,
                          false);
  // dK (K, D) = dSᵀ · q / √D
  detail::pack_pairs(sc.at.data(), Kp, ds, Kp, Q, K);
  detail::pack_pairs(b, Dp, hd.q(0), row, Q, D);
  detail::small_gemm_bf16(K, D, Qe / 2, 1.0f / sqrt_d, at, b, Dp, dqkv + hd.C + hd.channel, row,
                          false);
  zero_rows(dqkv + hd.channel, row, Q, hd.T, D);
  zero_rows(dqkv + hd.C + hd.channel, row, K, hd.T, D);
  zero_rows(dqkv + 2 * hd.C + hd.channel, row, K, hd.T, D);
}

void check_shape(const AttentionShape& s) {
  CHECK(s.B >= 0 && s.T > 0 && s.H > 0 && s.C > 0 && s.C % s.H == 0 && s.max_queries >= 0 &&
            s.window >= -1,
        "B ", s.B, " T ", s.T, " C ", s.C, " H ", s.H, " max_queries ", s.max_queries, " window ",
        s.window);
  CHECK(!s.query_mask, "plain attention masks keys only");
}

}  // namespace

namespace {

// Checks the shape, then runs fn(task, b, head, dropout, √D, scratch) for every (sequence b,
// head) task on the threads, each with the task's dropout stream and its thread's scratch.
template <class QKV, class Fn>
void for_each_head(const QKV* qkv, const std::int32_t* mask, AttentionShape s, float p,
                   std::uint64_t key, Fn&& fn) {
  check_shape(s);
  CHECK(mask != nullptr, "attention needs a key mask");
  const int D = s.C / s.H;
  const float sqrt_d = static_cast<float>(std::sqrt(static_cast<double>(D)));
  const Dropout drop0 = make_dropout(p, key);
  using ScratchT = std::conditional_t<std::is_same_v<QKV, float>, Scratch, ScratchBf16>;
  parallel_tasks(
      static_cast<std::int64_t>(s.B) * s.H, [&] { return thread_scratch<ScratchT>(s.T, D); },
      [&](std::int64_t task, ScratchT* scratch) {
        const int b = static_cast<int>(task / s.H), h = static_cast<int>(task % s.H);
        Dropout drop = drop0;
        drop.base = static_cast<std::uint64_t>(task) * s.T * s.T;
        fn(task, b, make_head(s, qkv, mask, b, h), drop, sqrt_d, *scratch);
      });
}

template <class QKV>
void forward_impl(float* out, float* probs, const QKV* qkv, const std::int32_t* mask,
                  AttentionShape s, float p, std::uint64_t key) {
  for_each_head(qkv, mask, s, p, key,
                [&](std::int64_t task, int b, const Head<QKV>& hd, const Dropout& drop,
                    float sqrt_d, auto& sc) {
                  float* o = out + static_cast<std::int64_t>(b) * s.T * s.C;
                  float* pr = probs + task * s.T * s.T;
                  if constexpr (std::is_same_v<QKV, float>) {
                    head_forward(o, pr, hd, drop, sqrt_d, s.window, sc);
                  } else {
                    head_forward_bf16(o, pr, hd, drop, sqrt_d, s.window, sc);
                  }
                });
}

template <class QKV>
void backward_impl(float* dqkv, const float* dout, const QKV* qkv, const float* probs,
                   const std::int32_t* mask, AttentionShape s, float p, std::uint64_t key) {
  for_each_head(qkv, mask, s, p, key,
                [&](std::int64_t task, int b, const Head<QKV>& hd, const Dropout& drop,
                    float sqrt_d, auto& sc) {
                  const std::int64_t seq = static_cast<std::int64_t>(b) * s.T;
                  float* dq = dqkv + seq * 3 * s.C;
                  const float* dO = dout + seq * s.C;
                  const float* pr = probs + task * s.T * s.T;
                  if constexpr (std::is_same_v<QKV, float>) {
                    head_backward(dq, dO, pr, hd, drop, sqrt_d, sc);
                  } else {
                    head_backward_bf16(dq, dO, pr, hd, drop, sqrt_d, sc);
                  }
                });
}

}  // namespace

void attention_forward(float* out, float* probs, const float* qkv, const std::int32_t* mask,
                       AttentionShape s, float p, std::uint64_t key) {
  forward_impl(out, probs, qkv, mask, s, p, key);
}

void attention_forward(float* out, float* probs, const std::uint16_t* qkv, const std::int32_t* mask,
                       AttentionShape s, float p, std::uint64_t key) {
  forward_impl(out, probs, qkv, mask, s, p, key);
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                        const std::int32_t* mask, AttentionShape s, float p, std::uint64_t key) {
  backward_impl(dqkv, dout, qkv, probs, mask, s, p, key);
}

void attention_backward(float* dqkv, const float* dout, const std::uint16_t* qkv,
                        const float* probs, const std::int32_t* mask, AttentionShape s, float p,
                        std::uint64_t key) {
  backward_impl(dqkv, dout, qkv, probs, mask, s, p, key);
}

}  // namespace bertfit
