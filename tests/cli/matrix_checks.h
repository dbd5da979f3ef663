// What the command matrix's two files share (matrix_cli_test.cc: sequence heads,
// matrix_token_cli_test.cc: token heads): the random model sizes, the `init` flags that make
// such a model, and the comparisons of what the binary wrote against the double-precision
// reference, with the tolerances argued at the top of matrix_cli_test.cc.
#pragma once

#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "matrix_families.h"
#include "model/param_layout.h"

namespace bertfit::testing {

// --max-seq-len; the position tables have 2 rows more (RoBERTa's positions start after the
// padding id 1).
constexpr int kMaxSeqLen = 132;
constexpr double kInt8Tolerance = 1.2e-1;
constexpr double kInitializerRange = 0.3;

// The scale logits are compared on: their norm, at least kInitializerRange per logit. A logit of
// these random models sums C products of features up to 1 with N(0, 0.3²) weights; rounding
// (bf16, int8) errs on the scale of those products, not on that of a sum that happens to cancel
// (a single regression logit of 0.04 is one).
double logit_scale(std::size_t n);

// The parameters rounded to bf16 (to nearest even), as bf16 products see the weights.
std::vector<double> rounded_to_bf16(std::vector<double> params);

// A random model's sizes: 1–6 heads of 2–7 channels, an odd intermediate size, 1–3 layers.
struct MatrixSizes {
  int heads = 1, hidden = 2, intermediate = 3, layers = 1;
};
MatrixSizes random_sizes(std::mt19937& rng);
std::string describe(const MatrixSizes& s);  // "C=12 H=3 I=31 L=2"

// `bertfit init` of such a model of `family` into `dir` (tokenizer `vocab`), with every dropout
// 0, the matrix's initializer range and positions; the caller appends the head's flags.
std::string init_args(const MatrixFamily& family, const MatrixSizes& sizes,
                      const std::string& activation, int seed, const std::string& dir,
                      const std::string& vocab);

// The parameters of the model folder `dir`, in the layout's order.
std::vector<double> params_of(const std::string& dir);

// The gradients `forward --grads` wrote to `path`, in the layout's order.
std::vector<double> read_grads(const std::string& path, const ParamLayout& layout);

// got against the reference's gradients: fp32, every tensor to 1e-4 relative (floor 1e-3 of
// the largest tensor's norm); bf16, the whole vector to 0.3 relative with cosine ≥ 0.95.
void expect_grads_match(const std::vector<double>& got, const std::vector<double>& want,
                        const ParamLayout& layout, bool bf16);

// One AdamW step of learning rate lr from `before` to `after` (its first: m̂ = g, v̂ = g²): every
// parameter moved by at most lr, and by −lr · sign(g) wherever the reference gradient g is
// clear of rounding. bf16: `at_bf16` is the exact gradient at the weights rounded to bf16
// (empty for fp32), to count the signs rounding alone flips.
void expect_first_adamw_step(const std::vector<double>& before, const std::vector<double>& after,
                             const std::vector<double>& grads, const std::vector<double>& at_bf16,
                             double lr, bool bf16);

}  // namespace bertfit::testing
