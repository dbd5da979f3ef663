// Finite-difference check of the attention backward on the double reference forward, with
// padded keys and dropout (fixed key, so the mask is a constant of the function), then the
// fast backward against the reference backward.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/attention.h"
#include "kernels/dropout.h"
#include "kernels/gradcheck_util.h"
#include "kernels/ref/ref.h"

namespace bertfit {
namespace {

using namespace bertfit::testing;

void check_attention(AttentionShape s, float p, const std::vector<std::int32_t>& mask) {
  SCOPED_TRACE(::testing::Message()
               << "B=" << s.B << " T=" << s.T << " C=" << s.C << " H=" << s.H << " p=" << p);
  const std::uint64_t key = dropout_key(1234, 5, 0, 1, 0);
  const std::size_t n_qkv = static_cast<std::size_t>(s.B) * s.T * 3 * s.C;
  const std::size_t n_out = static_cast<std::size_t>(s.B) * s.T * s.C;
  const std::size_t n_probs = static_cast<std::size_t>(s.B) * s.H * s.T * s.T;
  Rng rng(s.T * 100 + s.C);
  const std::vector<float> qkvf = random_floats(rng, n_qkv, -1, 1);
  const std::vector<float> gf = random_floats(rng, n_out, -1, 1);
  std::vector<double> qkv = as_double(qkvf), out(n_out), probs(n_probs);
  const std::vector<double> dout = as_double(gf);
  auto loss = [&] {
    ref::attention_forward(out.data(), probs.data(), qkv.data(), mask.data(), s, p, key);
    return weighted_sum(dout, out);
  };
  loss();
  std::vector<double> dqkv(n_qkv, 0.0);
  ref::attention_backward(dqkv.data(), dout.data(), qkv.data(), probs.data(), s, p, key);
  EXPECT_TRUE(gradients_match(dqkv, numeric_gradient(qkv, loss)));

  std::vector<float> outf(n_out), probsf(n_probs), dqkvf(n_qkv, 0.0f);
  attention_forward(outf.data(), probsf.data(), qkvf.data(), mask.data(), s, p, key);
  attention_backward(dqkvf.data(), gf.data(), qkvf.data(), probsf.data(), mask.data(), s, p, key);
  // Longest float reductions: T keys times a length-D dot product.
  EXPECT_TRUE(fast_matches_reference(dqkvf.data(), dqkv, s.T + 2.0 * s.C / s.H));
}

TEST(GradCheck, AttentionWithPaddedKeys) {
  // Sequence 1 has its last two tokens padded.
  const std::vector<std::int32_t> mask = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
  check_attention({2, 5, 8, 2}, 0.0f, mask);
  check_attention({2, 5, 8, 2}, 0.25f, mask);
}

TEST(GradCheck, AttentionThreeHeads) {
  const std::vector<std::int32_t> mask = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0};
  check_attention({2, 7, 12, 3}, 0.0f, mask);
  check_attention({2, 7, 12, 3}, 0.1f, mask);
}

}  // namespace
}  // namespace bertfit
