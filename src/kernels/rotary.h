// Rotary position embeddings (RoPE) on the q and k thirds of fused q|k|v rows, as transformers'
// ModernBERT applies them (apply_rotary_pos_emb with rotate_half, not interleaved): in each head
// of D channels, channel k < D/2 is paired with k + D/2 and
//   q'[k] = q[k]·cos(t·f_k) - q[k + D/2]·sin(t·f_k),  q'[k + D/2] = q[k + D/2]·cos(t·f_k) +
//   q[k]·sin(t·f_k)
// for the token at position t, f_k = theta^(-2k/D). The frequencies and the angle t·f_k are
// rounded to fp32 as torch computes them (inv_freq in fp32, one fp32 product per angle), cos and
// sin taken of that angle. The backward applies the inverse (transposed) rotation to dq and dk.
#pragma once

#include <cstdint>
#include <vector>

namespace bertfit {

// cos and sin of every (position, frequency) pair, (T, D/2) each.
struct RotaryTable {
  int T = 0, D = 0;
  double theta = 0;
  std::vector<float> cos, sin;
};
RotaryTable rotary_table(double theta, int D, int T);

// qkv (R, 3C) rows [q | k | v], H heads of D = C/H channels (D even); row r is position
// r % T (rows in the padded (B, T) layout). q and k rotated in place; v untouched.
void rotary_forward(float* qkv, const RotaryTable& t, std::int64_t R, int C, int H);
// The same on bf16 rows (fp32 arithmetic, each result rounded once).
void rotary_forward(std::uint16_t* qkv, const RotaryTable& t, std::int64_t R, int C, int H);
// dqkv (R, 3C): the gradients w.r.t. the rotated q and k become those w.r.t. q and k (the
// inverse rotation), in place; dv untouched.
void rotary_backward(float* dqkv, const RotaryTable& t, std::int64_t R, int C, int H);

}  // namespace bertfit
