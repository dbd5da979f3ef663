// Blockwise attention (attention_blockwise.h): one (sequence, head) task per thread as the plain
// kernel, and inside a task query blocks of kQb rows, each over the key blocks of kKb keys its
// rows reach. Per tile: S = (q / √D) · kᵀ (fp32; bf16: (q · kᵀ) / √D on bf16 operands), then
// per row the keys it sees (window, real keys), and
//   forward:  m' = max(m, max_j S), l = l·e^(m-m') + Σ_j e^(S-m'), acc = acc·e^(m-m') + P̃ · v
//             with P̃ = dropout(e^(S-m')) (dropout is linear: scaling the row later is the same);
//             at the end out = acc / l, lse = m + log l.
//   backward: P = e^(S - lse), P̃ = dropout(P), dV += P̃ᵀ · dO, dP̃ = dO · vᵀ,
//             dS = P ⊙ (dropout(dP̃) - r), dQ += dS · k / √D, dK += dSᵀ · q / √D.
// A row with no real key in its window (only past a sequence's end) sees every real key, and
// a sequence with no real key has all-zero scores over every key (uniform rows), both as the
// plain kernel's softmax_row.
#include "kernels/attention_blockwise.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "base/check.h"
#include "base/parallel.h"
#include "kernels/attention_internal.h"
#include "kernels/dropout_internal.h"
#include "kernels/small_gemm.h"
#include "kernels/vmath.h"

namespace bertfit {
namespace {

using detail::Dropout;
using detail::grow;
using detail::make_dropout;
using detail::round_up16;
using detail::vexp;

constexpr int kQb = 64;   // query rows per block
constexpr int kKb = 64;   // keys per block
constexpr int kKbp = 64;  // kKb rounded up to 16
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

int round_up2(int n) { return n + n % 2; }

// One (sequence b, head h) task: its slices of the fused (T, 3C) rows, the keys each row sees.
template <class E>
struct Head {
  int T, C, D;
  const std::int32_t* mask;  // (T) of sequence b
  std::int64_t channel;      // h · D
  int kend;                  // keys [kend, T) are padding: never seen (T when no key is real)
  int qend;                  // query rows computed: [0, qend)
  bool any_real;             // some key is real (else every row is uniform over all T keys)
  int window;                // -1: every key
  const int* real_before;    // (T+1) real keys among [0, j) (window only)
  const E* src;              // row 0 of this head's q; k at +C, v at +2C; rows 3C apart
  std::int64_t row() const { return 3 * static_cast<std::int64_t>(C); }
  const E* q(int i) const { return src + i * row(); }
  const E* k(int j) const { return src + j * row() + C; }
  const E* v(int j) const { return src + j * row() + 2 * static_cast<std::int64_t>(C); }
  bool real(int j) const { return !any_real || mask[j] != 0; }
  // Keys [lo, hi) row i may see (real() among them).
  void keys(int i, int& lo, int& hi) const {
    lo = 0;
    hi = kend;
    if (window < 0 || !any_real) return;
    const int a = std::min(std::max(0, i - window), kend);
    const int b = std::max(a, std::min(kend, i + window + 1));
    if (real_before[b] - real_before[a] == 0) return;  // past the end: every real key
    lo = a;
    hi = b;
  }
};

struct Scratch {
  std::vector<int> real_before;    // (T+1)
  std::vector<float> qs;           // (kQb, D) q / √D (fp32)
  std::vector<float> kt;           // (D, kKbp) kᵀ or vᵀ of a key block (fp32)
  std::vector<float> s;            // (kQb, kKbp) scores, then dP̃ and dS (backward)
  std::vector<float> pd;           // (kQb, kKbp) P̃ (dropped probabilities)
  std::vector<float> pr;           // (kQb, kKbp) P (backward)
  std::vector<std::uint8_t> keep;  // (kQb, kKbp)
  std::vector<float> acc;          // (kQb, D) forward: the unnormalized output
  std::vector<float> m, l, r;      // (kQb) running max, sum (forward); r (backward)
  std::vector<int> lo, hi;         // (kQb) each row's keys
  std::vector<std::uint16_t> a;    // bf16 row-major A operand
  std::vector<std::uint32_t> at;   // bf16 pairs of rows read as a transposed A
  std::vector<std::uint32_t> b;    // bf16 B operand
  void ensure(int T, int D) {
    const std::size_t Dp = static_cast<std::size_t>(round_up16(D)), De = round_up2(D);
    grow(real_before, static_cast<std::size_t>(T) + 1);
    grow(qs, kQb * static_cast<std::size_t>(D));
    grow(kt, static_cast<std::size_t>(D) * kKbp);
    for (auto* v : {&s, &pd, &pr}) grow(*v, static_cast<std::size_t>(kQb) * kKbp);
    grow(keep, static_cast<std::size_t>(kQb) * kKbp);
    grow(acc, kQb * static_cast<std::size_t>(D));
    for (auto* v : {&m, &l, &r}) grow(*v, kQb);
    grow(lo, kQb);
    grow(hi, kQb);
    grow(a, kQb * std::max<std::size_t>(kKb + 2, De));
    grow(at, (kQb / 2 + 1) * static_cast<std::size_t>(kKbp));
    grow(b, std::max(De / 2 * kKbp, (std::max(kQb, kKb) / 2 + 1) * Dp));
  }
};

template <class E>
Head<E> make_head(const AttentionShape& s, const E* qkv, const std::int32_t* mask, int b, int h,
                  Scratch& sc) {
  const int D = s.C / s.H;
  const std::int32_t* m = mask + static_cast<std::int64_t>(b) * s.T;
  int kend = s.T;
  while (kend > 0 && m[kend - 1] == 0) --kend;
  const bool any_real = kend > 0;
  if (!any_real) kend = s.T;
  int qend = s.skip_padding_queries ? kend : s.T;
  if (s.max_queries > 0) qend = std::min(qend, s.max_queries);
  if (s.window >= 0) {
    sc.real_before[0] = 0;
    for (int j = 0; j < s.T; ++j) sc.real_before[j + 1] = sc.real_before[j] + (m[j] != 0);
  }
  const std::int64_t channel = static_cast<std::int64_t>(h) * D;
  return Head<E>{s.T,
                 s.C,
                 D,
                 m,
                 channel,
                 kend,
                 qend,
                 any_real,
                 s.window,
                 sc.real_before.data(),
                 qkv + static_cast<std::int64_t>(b) * s.T * 3 * s.C + channel};
}

// The rows [i0, i0 + nq)'s keys into sc.lo / sc.hi; returns the union [lo, hi) of them.
template <class E>
std::pair<int, int> block_keys(const Head<E>& hd, int i0, int nq, Scratch& sc) {
  int lo = hd.kend, hi = 0;
  for (int r = 0; r < nq; ++r) {
    hd.keys(i0 + r, sc.lo[r], sc.hi[r]);
    lo = std::min(lo, sc.lo[r]);
    hi = std::max(hi, sc.hi[r]);
  }
  return {lo, std::max(lo, hi)};
}

// S (nq, kKbp) of query rows [i0, i0 + nq) and keys [j0, j0 + nk). fp32: sc.qs holds q / √D.
void scores(const Head<float>& hd, int i0, int nq, int j0, int nk, Scratch& sc) {
  (void)i0;
  const int D = hd.D;
  for (int j = 0; j < nk; ++j) {
    const float* kj = hd.k(j0 + j);
    for (int d = 0; d < D; ++d) sc.kt[static_cast<std::size_t>(d) * kKbp + j] = kj[d];
  }
  for (int d = 0; d < D; ++d) {
    std::fill_n(sc.kt.data() + static_cast<std::size_t>(d) * kKbp + nk, kKbp - nk, 0.0f);
  }
  const int nkp = round_up16(nk);
  detail::small_gemm(nq, nkp, D, 1.0f, sc.qs.data(), D, 1, sc.kt.data(), kKbp, sc.s.data(), kKbp,
                     false);
}

void scores(const Head<std::uint16_t>& hd, int i0, int nq, int j0, int nk, Scratch& sc) {
  const int D = hd.D, De = round_up2(D);
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(D));
  detail::BF16Pairs qa{hd.q(i0), hd.row(), 2};
  if (D != De) {
    detail::pack_rows(sc.a.data(), De, hd.q(i0), hd.row(), nq, D);
    qa = {sc.a.data(), De, 2};
  }
  detail::pack_pairs_within_rows(sc.b.data(), kKbp, hd.k(j0), hd.row(), D, nk);
  detail::small_gemm_bf16(nq, nk, De / 2, inv_sqrt_d, qa, sc.b.data(), kKbp, sc.s.data(), kKbp,
                          false);
}

void scaled_queries(const Head<float>& hd, int i0, int nq, float sqrt_d, Scratch& sc) {
  for (int r = 0; r < nq; ++r) {
    const float* qi = hd.q(i0 + r);
    float* o = sc.qs.data() + static_cast<std::size_t>(r) * hd.D;
    for (int d = 0; d < hd.D; ++d) o[d] = qi[d] / sqrt_d;
  }
}
void scaled_queries(const Head<std::uint16_t>&, int, int, float, Scratch&) {}

// The dropout's keep mask of row i over keys [j0, j0 + nk) into keep, P̃ = P · keep · scale.
void drop_row(float* pd, std::uint8_t* keep, const float* p, const Dropout& drop, int T, int i,
              int j0, int nk) {
  if (!drop.active) {
    std::copy_n(p, nk, pd);
    return;
  }
  drop.keep_row(keep, drop.base + static_cast<std::uint64_t>(i) * T + j0, nk);
  for (int j = 0; j < nk; ++j) {
    const float kept = p[j] * drop.scale;
    pd[j] = keep[j] != 0 ? kept : 0.0f;
  }
}

// acc (nq, D) += P̃ (nq, nk; sc.pd) · v[j0, j0 + nk).
void accumulate_pv(const Head<float>& hd, int nq, int j0, int nk, Scratch& sc) {
  detail::small_gemm(nq, hd.D, nk, 1.0f, sc.pd.data(), kKbp, 1, hd.v(j0), hd.row(), sc.acc.data(),
                     hd.D, true);
}
void accumulate_pv(const Head<std::uint16_t>& hd, int nq, int j0, int nk, Scratch& sc) {
  const int nke = round_up2(nk), Dp = round_up16(hd.D);
  detail::pack_rows(sc.a.data(), nke, sc.pd.data(), kKbp, nq, nk);
  detail::pack_pairs(sc.b.data(), Dp, hd.v(j0), hd.row(), nk, hd.D);
  detail::small_gemm_bf16(nq, hd.D, nke / 2, 1.0f, {sc.a.data(), nke, 2}, sc.b.data(), Dp,
                          sc.acc.data(), hd.D, true);
}

// out, lse: sequence b's first row / this head's (T) row.
template <class E>
void head_forward(float* out, float* lse, const Head<E>& hd, const Dropout& drop, float sqrt_d,
                  Scratch& sc) {
  const int D = hd.D;
  for (int i0 = 0; i0 < hd.qend; i0 += kQb) {
    const int nq = std::min(kQb, hd.qend - i0);
    const auto [lo, hi] = block_keys(hd, i0, nq, sc);
    scaled_queries(hd, i0, nq, sqrt_d, sc);
    std::fill_n(sc.acc.data(), static_cast<std::size_t>(nq) * D, 0.0f);
    std::fill_n(sc.m.data(), nq, kMinusInf);
    std::fill_n(sc.l.data(), nq, 0.0f);
    for (int j0 = lo; j0 < hi; j0 += kKb) {
      const int nk = std::min(kKb, hi - j0);
      scores(hd, i0, nq, j0, nk, sc);
      for (int r = 0; r < nq; ++r) {
        float* sr = sc.s.data() + static_cast<std::size_t>(r) * kKbp;
        float* pd = sc.pd.data() + static_cast<std::size_t>(r) * kKbp;
        const int a = std::max(j0, sc.lo[r]) - j0, e = std::min(j0 + nk, sc.hi[r]) - j0;
        float mx = kMinusInf;
        for (int j = a; j < e; ++j) {
          if (!hd.any_real) sr[j] = 0.0f;  // no real key: HF's uniform row
          if (hd.real(j0 + j)) mx = std::max(mx, sr[j]);
        }
        if (mx == kMinusInf) {  // nothing seen in this block
          std::fill_n(pd, nk, 0.0f);
          continue;
        }
        const float m_new = std::max(sc.m[r], mx);
        const float corr = sc.m[r] == kMinusInf ? 0.0f : std::exp(sc.m[r] - m_new);
        float* pr = sc.pr.data() + static_cast<std::size_t>(r) * kKbp;
        double sum = 0.0;
        for (int j = 0; j < nk; ++j) {
          const bool seen = j >= a && j < e && hd.real(j0 + j);
          pr[j] = seen ? vexp(sr[j] - m_new) : 0.0f;
          sum += pr[j];
        }
        sc.l[r] = static_cast<float>(sc.l[r] * corr + sum);
        sc.m[r] = m_new;
        if (corr != 1.0f) {
          float* ar = sc.acc.data() + static_cast<std::size_t>(r) * D;
          for (int d = 0; d < D; ++d) ar[d] *= corr;
        }
        drop_row(pd, sc.keep.data() + static_cast<std::size_t>(r) * kKbp, pr, drop, hd.T, i0 + r,
                 j0, nk);
      }
      accumulate_pv(hd, nq, j0, nk, sc);
    }
    for (int r = 0; r < nq; ++r) {
      const float inv = 1.0f / sc.l[r];
      const float* ar = sc.acc.data() + static_cast<std::size_t>(r) * D;
      float* o = out + static_cast<std::int64_t>(i0 + r) * hd.C + hd.channel;
      for (int d = 0; d < D; ++d) o[d] = ar[d] * inv;
      if (lse != nullptr) lse[i0 + r] = sc.m[r] + std::log(sc.l[r]);
    }
  }
}

// ---- backward products on a tile (query rows [i0, i0 + nq), keys [j0, j0 + nk)); dq, dk,
// dv: this head's columns of dqkv's row 0; dO: dout's row i0 (stride C).

void tile_backward(float* dv, const float* dO, const Head<float>& hd, int nq, int j0, int nk,
                   Scratch& sc) {
  const int D = hd.D, nkp = round_up16(nk);
  const std::ptrdiff_t row = hd.row();
  // dV += P̃ᵀ · dO
  detail::small_gemm(nk, D, nq, 1.0f, sc.pd.data(), 1, kKbp, dO, hd.C, dv + j0 * row, row, true);
  // dP̃ (nq, nkp) = dO · vᵀ
  for (int j = 0; j < nk; ++j) {
    const float* vj = hd.v(j0 + j);
    for (int d = 0; d < D; ++d) sc.kt[static_cast<std::size_t>(d) * kKbp + j] = vj[d];
  }
  for (int d = 0; d < D; ++d) {
    std::fill_n(sc.kt.data() + static_cast<std::size_t>(d) * kKbp + nk, kKbp - nk, 0.0f);
  }
  detail::small_gemm(nq, nkp, D, 1.0f, dO, hd.C, 1, sc.kt.data(), kKbp, sc.s.data(), kKbp, false);
}

void tile_backward_products(float* dq, float* dk, const Head<float>& hd, int i0, int nq, int j0,
                            int nk, float sqrt_d, Scratch& sc) {
  const int D = hd.D;
  const std::ptrdiff_t row = hd.row();
  // dQ += dS · k / √D;  dK += dSᵀ · (q / √D)
  detail::small_gemm(nq, D, nk, 1.0f / sqrt_d, sc.s.data(), kKbp, 1, hd.k(j0), row, dq + i0 * row,
                     row, true);
  detail::small_gemm(nk, D, nq, 1.0f, sc.s.data(), 1, kKbp, sc.qs.data(), D, dk + j0 * row, row,
                     true);
}

void tile_backward(float* dv, const float* dO, const Head<std::uint16_t>& hd, int nq, int j0,
                   int nk, Scratch& sc) {
  const int D = hd.D, De = round_up2(D), Dp = round_up16(D), nqe = round_up2(nq);
  const std::ptrdiff_t row = hd.row();
  const detail::BF16Pairs at{sc.at.data(), 2, 2 * static_cast<std::ptrdiff_t>(kKbp)};
  // dV += P̃ᵀ · dO
  detail::pack_pairs(sc.at.data(), kKbp, sc.pd.data(), kKbp, nq, nk);
  detail::pack_pairs(sc.b.data(), Dp, dO, hd.C, nq, D);
  detail::small_gemm_bf16(nk, D, nqe / 2, 1.0f, at, sc.b.data(), Dp, dv + j0 * row, row, true);
  // dP̃ (nq, nk) = dO · vᵀ
  detail::pack_rows(sc.a.data(), De, dO, hd.C, nq, D);
  detail::pack_pairs_within_rows(sc.b.data(), kKbp, hd.v(j0), row, D, nk);
  detail::small_gemm_bf16(nq, nk, De / 2, 1.0f, {sc.a.data(), De, 2}, sc.b.data(), kKbp,
                          sc.s.data(), kKbp, false);
}

void tile_backward_products(float* dq, float* dk, const Head<std::uint16_t>& hd, int i0, int nq,
                            int j0, int nk, float sqrt_d, Scratch& sc) {
  const int D = hd.D, Dp = round_up16(D), nke = round_up2(nk), nqe = round_up2(nq);
  const std::ptrdiff_t row = hd.row();
  // dQ += dS · k / √D
  detail::pack_rows(sc.a.data(), nke, sc.s.data(), kKbp, nq, nk);
  detail::pack_pairs(sc.b.data(), Dp, hd.k(j0), row, nk, D);
  detail::small_gemm_bf16(nq, D, nke / 2, 1.0f / sqrt_d, {sc.a.data(), nke, 2}, sc.b.data(), Dp,
                          dq + i0 * row, row, true);
  // dK += dSᵀ · q / √D
  const detail::BF16Pairs at{sc.at.data(), 2, 2 * static_cast<std::ptrdiff_t>(kKbp)};
  detail::pack_pairs(sc.at.data(), kKbp, sc.s.data(), kKbp, nq, nk);
  detail::pack_pairs(sc.b.data(), Dp, hd.q(i0), row, nq, D);
  detail::small_gemm_bf16(nk, D, nqe / 2, 1.0f / sqrt_d, at, sc.b.data(), Dp, dk + j0 * row, row,
                          true);
}

// dqkv, dout, out: sequence b's first row; lse: this head's (T) row.
template <class E>
void head_backward(float* dqkv, const float* dout, const float* out, const float* lse,
                   const Head<E>& hd, const Dropout& drop, float sqrt_d, Scratch& sc) {
  const int D = hd.D;
  const std::ptrdiff_t row = hd.row();
  float* dq = dqkv + hd.channel;
  float* dk = dq + hd.C;
  float* dv = dk + hd.C;
  for (int i = 0; i < hd.T; ++i) {
    for (float* g : {dq, dk, dv}) std::fill_n(g + i * row, D, 0.0f);
  }
  for (int i0 = 0; i0 < hd.qend; i0 += kQb) {
    const int nq = std::min(kQb, hd.qend - i0);
    const auto [lo, hi] = block_keys(hd, i0, nq, sc);
    scaled_queries(hd, i0, nq, sqrt_d, sc);
    const float* dO = dout + static_cast<std::int64_t>(i0) * hd.C + hd.channel;
    for (int r = 0; r < nq; ++r) {
      const float* g = dO + static_cast<std::int64_t>(r) * hd.C;
      const float* o = out + static_cast<std::int64_t>(i0 + r) * hd.C + hd.channel;
      double acc = 0.0;
      for (int d = 0; d < D; ++d) acc += static_cast<double>(g[d]) * o[d];
      sc.r[r] = static_cast<float>(acc);
    }
    for (int j0 = lo; j0 < hi; j0 += kKb) {
      const int nk = std::min(kKb, hi - j0);
      scores(hd, i0, nq, j0, nk, sc);
      // P = e^(S - lse) over the keys each row sees; P̃ = dropout(P).
      for (int r = 0; r < nq; ++r) {
        const float* sr = sc.s.data() + static_cast<std::size_t>(r) * kKbp;
        float* pr = sc.pr.data() + static_cast<std::size_t>(r) * kKbp;
        const int a = std::max(j0, sc.lo[r]) - j0, e = std::min(j0 + nk, sc.hi[r]) - j0;
        const float li = lse[i0 + r];
        for (int j = 0; j < nk; ++j) {
          const bool seen = j >= a && j < e && hd.real(j0 + j);
          const float sj = hd.any_real ? sr[j] : 0.0f;
          pr[j] = seen ? vexp(sj - li) : 0.0f;
        }
        drop_row(sc.pd.data() + static_cast<std::size_t>(r) * kKbp,
                 sc.keep.data() + static_cast<std::size_t>(r) * kKbp, pr, drop, hd.T, i0 + r, j0,
                 nk);
      }
      // dV += P̃ᵀ · dO; sc.s = dP̃ = dO · vᵀ
      tile_backward(dv, dO, hd, nq, j0, nk, sc);
      // dS = P ⊙ (dropout(dP̃) - r), in place; zero where P is.
      for (int r = 0; r < nq; ++r) {
        float* ds = sc.s.data() + static_cast<std::size_t>(r) * kKbp;
        const float* pr = sc.pr.data() + static_cast<std::size_t>(r) * kKbp;
        const std::uint8_t* keep = sc.keep.data() + static_cast<std::size_t>(r) * kKbp;
        const float rr = sc.r[r];
        if (drop.active) {
          for (int j = 0; j < nk; ++j) {
            const float kept = ds[j] * drop.scale;
            ds[j] = pr[j] * ((keep[j] != 0 ? kept : 0.0f) - rr);
          }
        } else {
          for (int j = 0; j < nk; ++j) ds[j] = pr[j] * (ds[j] - rr);
        }
      }
      tile_backward_products(dq, dk, hd, i0, nq, j0, nk, sqrt_d, sc);
    }
  }
}

void check_shape(const AttentionShape& s) {
  CHECK(s.B >= 0 && s.T > 0 && s.H > 0 && s.C > 0 && s.C % s.H == 0 && s.max_queries >= 0 &&
            s.window >= -1,
        "B ", s.B, " T ", s.T, " C ", s.C, " H ", s.H, " max_queries ", s.max_queries, " window ",
        s.window);
  CHECK(!s.query_mask, "blockwise attention masks keys only");
}

// Runs fn(task, b, head, dropout, √D, scratch) for every (sequence b, head) task on the threads.
template <class QKV, class Fn>
void for_each_head(const QKV* qkv, const std::int32_t* mask, AttentionShape s, float p,
                   std::uint64_t key, Fn&& fn) {
  check_shape(s);
  CHECK(mask != nullptr, "attention needs a key mask");
  const int D = s.C / s.H;
  const float sqrt_d = static_cast<float>(std::sqrt(static_cast<double>(D)));
  const Dropout drop0 = make_dropout(p, key);
  parallel_tasks(
      static_cast<std::int64_t>(s.B) * s.H, [&] { return detail::thread_scratch<Scratch>(s.T, D); },
      [&](std::int64_t task, Scratch* sc) {
        const int b = static_cast<int>(task / s.H), h = static_cast<int>(task % s.H);
        Dropout drop = drop0;
        drop.base = static_cast<std::uint64_t>(task) * s.T * s.T;
        fn(task, b, make_head(s, qkv, mask, b, h, *sc), drop, sqrt_d, *sc);
      });
}

template <class QKV>
void forward_impl(float* out, float* lse, const QKV* qkv, const std::int32_t* mask,
                  AttentionShape s, float p, std::uint64_t key) {
  for_each_head(qkv, mask, s, p, key,
                [&](std::int64_t task, int b, const Head<QKV>& hd, const Dropout& drop,
                    float sqrt_d, Scratch& sc) {
                  head_forward(out + static_cast<std::int64_t>(b) * s.T * s.C,
                               lse != nullptr ? lse + task * s.T : nullptr, hd, drop, sqrt_d, sc);
                });
}

template <class QKV>
void backward_impl(float* dqkv, const float* dout, const QKV* qkv, const float* out,
                   const float* lse, const std::int32_t* mask, AttentionShape s, float p,
                   std::uint64_t key) {
  for_each_head(qkv, mask, s, p, key,
                [&](std::int64_t task, int b, const Head<QKV>& hd, const Dropout& drop,
                    float sqrt_d, Scratch& sc) {
                  const std::int64_t seq = static_cast<std::int64_t>(b) * s.T;
                  head_backward(dqkv + seq * 3 * s.C, dout + seq * s.C, out + seq * s.C,
                                lse + task * s.T, hd, drop, sqrt_d, sc);
                });
}

}  // namespace

void attention_blockwise_forward(float* out, float* lse, const float* qkv, const std::int32_t* mask,
                                 AttentionShape s, float p, std::uint64_t key) {
  forward_impl(out, lse, qkv, mask, s, p, key);
}

void attention_blockwise_forward(float* out, float* lse, const std::uint16_t* qkv,
                                 const std::int32_t* mask, AttentionShape s, float p,
                                 std::uint64_t key) {
  forward_impl(out, lse, qkv, mask, s, p, key);
}

void attention_blockwise_backward(float* dqkv, const float* dout, const float* qkv,
                                  const float* out, const float* lse, const std::int32_t* mask,
                                  AttentionShape s, float p, std::uint64_t key) {
  backward_impl(dqkv, dout, qkv, out, lse, mask, s, p, key);
}

void attention_blockwise_backward(float* dqkv, const float* dout, const std::uint16_t* qkv,
                                  const float* out, const float* lse, const std::int32_t* mask,
                                  AttentionShape s, float p, std::uint64_t key) {
  backward_impl(dqkv, dout, qkv, out, lse, mask, s, p, key);
}

}  // namespace bertfit
