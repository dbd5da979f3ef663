// Internal to kernels/: the pieces the attention kernels share (attention.cc, plain scaled
// dot-product attention, and attention_relative.cc, DeBERTa's disentangled attention): the
// dropout on the probabilities, the masked softmax and its backward, per-thread scratch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/dropout_internal.h"
#include "kernels/vmath.h"

namespace bertfit::detail {

struct Dropout {
  bool active;
  std::uint32_t threshold;
  float scale;
  std::uint64_t key;
  // Index of element (i, 0) of this head's (T,T) block in the (B,H,T,T) mask.
  std::uint64_t base;
  // keep[j] = 1 if element (i, j) survives, for j in [0, n); i_row: element (i, 0)'s index.
  // Branch-free so that the compiler vectorises the hash (8 64-bit lanes per AVX-512 vector).
  void keep_row(std::uint8_t* keep, std::uint64_t i_row, int n) const {
    for (int j = 0; j < n; ++j) {
      keep[j] = random_bits(key, i_row + static_cast<std::uint64_t>(j)) >= threshold;
    }
  }
};

// The largest scores[j] with mask[j] != 0 (-inf if none), in 16 running maxima that vectorise
// (a max-reduction does not without -ffinite-math-only); a NaN score may be skipped.
inline float masked_max(const float* scores, const std::int32_t* mask, int T) {
  constexpr int kLanes = 16;
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  float lane[kLanes];
  std::fill_n(lane, kLanes, kMinusInf);
  int j = 0;
  for (; j + kLanes <= T; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float v = mask[j + l] != 0 ? scores[j + l] : kMinusInf;
      lane[l] = lane[l] < v ? v : lane[l];
    }
  }
  for (; j < T; ++j) {
    if (mask[j] != 0) lane[0] = std::max(lane[0], scores[j]);
  }
  return *std::max_element(lane, lane + kLanes);
}

// probs (T) = softmax of scores over the real keys; masked keys get exactly 0. With no real
// key HF's rows are all finfo.min, i.e. uniform 1/T.
inline void masked_softmax(float* probs, const float* scores, const std::int32_t* mask, int T,
                           bool any_real) {
  if (!any_real) {
    std::fill(probs, probs + T, 1.0f / static_cast<float>(T));
    return;
  }
  const float mx = masked_max(scores, mask, T);
  for (int j = 0; j < T; ++j) probs[j] = mask[j] != 0 ? vexp(scores[j] - mx) : 0.0f;
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j < T; ++j) sum += probs[j];
  const float inv = static_cast<float>(1.0 / sum);
  for (int j = 0; j < T; ++j) probs[j] *= inv;
}

inline Dropout make_dropout(float p, std::uint64_t key) {
  Dropout d{p > 0.0f, keep_threshold(p), 1.0f, key, 0};
  if (d.active) d.scale = keep_scale(p);
  return d;
}

inline int round_up16(int n) { return (n + 15) / 16 * 16; }

template <class E>
void grow(std::vector<E>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
}

// The calling thread's scratch, kept from call to call (OpenMP's threads persist), so that a
// step does not allocate, zero and page-fault fresh buffers for every attention call (0.7% of
// a bf16 step in the kernel's clear_page before). Sized for the largest T and D seen so far;
// every buffer's contents are written before they are read.
template <class ScratchT>
ScratchT* thread_scratch(int T, int D) {
  thread_local ScratchT sc;
  sc.ensure(T, D);
  return &sc;
}

// The probabilities after dropout as a (Q, ·) operand: probs itself (leading dimension T)
// without dropout, else pd (Q, Kp) = probs · keep / (1-p) for the query rows computed, with
// the keep mask left in sc.keep (Q, Kp) for the backward's dP.
struct ProbsView {
  const float* p;
  std::ptrdiff_t ld;
};
template <class HeadT, class ScratchT>
ProbsView dropped_probs(const float* probs, const HeadT& hd, const Dropout& drop, int Kp,
                        ScratchT& sc) {
  if (!drop.active) return {probs, hd.T};
  for (int i = 0; i < hd.qend; ++i) {
    const float* pi = probs + static_cast<std::int64_t>(i) * hd.T;
    float* o = sc.pd.data() + static_cast<std::size_t>(i) * Kp;
    std::uint8_t* keep = sc.keep.data() + static_cast<std::size_t>(i) * Kp;
    drop.keep_row(keep, drop.base + static_cast<std::uint64_t>(i) * hd.T, hd.kend);
    for (int j = 0; j < hd.kend; ++j) {
      const float kept = pi[j] * drop.scale;  // loaded unconditionally: the loop vectorises
      o[j] = keep[j] != 0 ? kept : 0.0f;
    }
  }
  return {sc.pd.data(), Kp};
}

// In place over rows [0, Q) of ds (leading dimension Kp), holding dP_drop = dO · vᵀ:
// dP = dP_drop ⊙ keep / (1-p) (keep: the mask dropped_probs left, same layout);
// r = Σ_j dP_j P_j;  dS = P ⊙ (dP - r), over the keys [0, kend).
template <class HeadT>
void softmax_backward_rows(float* ds, int Kp, const float* probs, const HeadT& hd,
                           const Dropout& drop, const std::uint8_t* keep_mask) {
  const int K = hd.kend;
  for (int i = 0; i < hd.qend; ++i) {
    const float* pi = probs + static_cast<std::int64_t>(i) * hd.T;
    float* dsi = ds + static_cast<std::size_t>(i) * Kp;
    if (drop.active) {
      const std::uint8_t* keep = keep_mask + static_cast<std::size_t>(i) * Kp;
      for (int j = 0; j < K; ++j) {
        const float kept = dsi[j] * drop.scale;
        dsi[j] = keep[j] != 0 ? kept : 0.0f;
      }
    }
    double r = 0.0;
#pragma omp simd reduction(+ : r)
    for (int j = 0; j < K; ++j) r += static_cast<double>(dsi[j]) * pi[j];
    const float rf = static_cast<float>(r);
    for (int j = 0; j < K; ++j) dsi[j] = pi[j] * (dsi[j] - rf);
  }
}

}  // namespace bertfit::detail
