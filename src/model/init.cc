// Counter-based normal sampling for parameter initialisation: element i of tensor t takes the
// Box-Muller transform of two uniforms hashed from (seed, t, i / 2), so the values do not
// depend on how the work is split across threads.
#include "model/init.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/check.h"
#include "base/parallel.h"
#include "model/family.h"

namespace bertfit {
namespace {

// SplitMix64's finaliser: a bijective 64-bit mix with full avalanche.
std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// A uniform in (0, 1] from the top 53 bits (never 0, so log() is finite).
double to_unit(std::uint64_t bits) {
  return static_cast<double>((bits >> 11) + 1) * (1.0 / 9007199254740992.0);
}

void fill_normal(float* out, std::int64_t n, std::uint64_t stream_key, double std_dev) {
  // Pair p yields elements 2p (cos) and 2p+1 (sin).
  const std::int64_t pairs = (n + 1) / 2;
  parallel_for(pairs, 1 << 14, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) {
      std::uint64_t counter = stream_key + 2 * static_cast<std::uint64_t>(p);
      double u1 = to_unit(mix64(counter));
      double u2 = to_unit(mix64(counter + 1));
      double r = std_dev * std::sqrt(-2.0 * std::log(u1));
      double theta = 2.0 * std::numbers::pi * u2;
      out[2 * p] = static_cast<float>(r * std::cos(theta));
      if (2 * p + 1 < n) out[2 * p + 1] = static_cast<float>(r * std::sin(theta));
    }
  });
}

// The same, each value redrawn (from further counters) until it lies within ±cutoff·std, as
// torch's trunc_normal_ bounds it.
void fill_truncated_normal(float* out, std::int64_t n, std::uint64_t stream_key, double std_dev,
                           double cutoff) {
  const double bound = cutoff * std_dev;
  parallel_for(n, 1 << 14, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      for (std::uint64_t attempt = 0;; ++attempt) {
        const std::uint64_t counter =
            stream_key + 2 * static_cast<std::uint64_t>(i) + (attempt << 48);
        const double u1 = to_unit(mix64(counter)), u2 = to_unit(mix64(counter + 1));
        const double v =
            std_dev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
        if (std::fabs(v) <= bound) {
          out[i] = static_cast<float>(v);
          break;
        }
      }
    }
  });
}

// The standard deviation of a normal tensor under the config's scheme (see InitScheme).
double std_of(const ParamEntry& e, const ModelConfig& c) {
  if (c.init_scheme == InitScheme::kBert) return c.initializer_range;
  switch (e.role) {
    case Role::kOW:
    case Role::kFf2W:
    case Role::kPreW:
      return c.initializer_range / std::sqrt(2.0 * c.layers);
    case Role::kClsW:
      return 1.0 / std::sqrt(static_cast<double>(c.hidden));
    default:
      return c.initializer_range;
  }
}

}  // namespace

void init_param_tensor(const ParamLayout& layout, const ModelConfig& config,
                       std::size_t tensor_index, std::uint64_t seed, float* params) {
  CHECK(tensor_index < layout.entries().size(), "tensor index ", tensor_index);
  const ParamEntry& e = layout.entries()[tensor_index];
  float* out = params + e.offset;
  switch (e.init) {
    case ParamInit::kZero:
      std::fill(out, out + e.size, 0.0f);
      break;
    case ParamInit::kOne:
      std::fill(out, out + e.size, 1.0f);
      break;
    case ParamInit::kNormal: {
      // Each tensor gets its own counter stream; mixing twice separates nearby seeds/indices.
      std::uint64_t key = mix64(mix64(seed) ^ (0x9e3779b97f4a7c15ULL * (tensor_index + 1)));
      if (config.init_scheme == InitScheme::kModernBert) {
        fill_truncated_normal(out, e.size, key, std_of(e, config), config.initializer_cutoff);
      } else {
        fill_normal(out, e.size, key, config.initializer_range);
      }
      break;
    }
  }
  if (config.init_scheme == InitScheme::kModernBert) return;  // no padding row zeroed
  // nn.Embedding(padding_idx=pad) starts its padding row at zero: the word embeddings', and the
  // position embeddings' where positions count from the padding id (RoBERTa).
  const bool position_padding = config.family->position_ids == PositionIds::kAfterPadding;
  if (e.role == Role::kWordEmb || (e.role == Role::kPosEmb && position_padding)) {
    CHECK(config.pad_token_id >= 0 && config.pad_token_id < e.shape.dims[0], "pad_token_id ",
          config.pad_token_id);
    std::int64_t C = e.shape.dims[1];
    std::fill(out + config.pad_token_id * C, out + (config.pad_token_id + 1) * C, 0.0f);
  }
}

void init_params(const ParamLayout& layout, const ModelConfig& config, std::uint64_t seed,
                 float* params) {
  for (std::size_t t = 0; t < layout.entries().size(); ++t) {
    init_param_tensor(layout, config, t, seed, params);
  }
}

}  // namespace bertfit
