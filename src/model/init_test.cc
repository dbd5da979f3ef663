// HF initialisation: init + save produces exactly the tensor set of the transformers golden
// folders; the statistics match normal(0, initializer_range); the [PAD] row, LayerNorm and
// biases are exact; values are deterministic whatever the thread count.
#include "model/init.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "base/error.h"
#include "base/parallel.h"
#include "io/safetensors.h"
#include "model/model_io.h"

namespace bertfit {
namespace {

namespace fs = std::filesystem;
const std::string kGolden = std::string(BERTFIT_SHARED_DIR) + "/golden/";

std::map<std::string, Shape> float_tensors(const std::string& path) {
  std::map<std::string, Shape> out;
  auto file = SafetensorsFile::open(path);
  for (const auto& t : file.tensors()) {
    if (is_floating(t.dtype)) out[t.name] = t.shape;
  }
  return out;
}

// Done-when of the init issue: init + save gives exactly the golden folder's tensors (names and
// shapes), leaving out only non-parameter integer buffers such as position_ids.
TEST(Init, SavedTensorSetEqualsTheGoldenFolders) {
  fs::path tmp = fs::temp_directory_path() / cat("bertfit_init_test_", ::getpid());
  for (const char* model : {"distilbert-tiny", "bert-tiny", "modernbert-tiny"}) {
    std::string golden = kGolden + model + "/model";
    ModelState state(load_model_config(golden + "/config.json"));
    init_params(state.layout, state.config, 7, state.params.data());
    std::string out = (tmp / model).string();
    save_model(out, state, golden);
    EXPECT_EQ(float_tensors(out + "/model.safetensors"),
              float_tensors(golden + "/model.safetensors"))
        << model;
    auto golden_file = SafetensorsFile::open(golden + "/model.safetensors");
    for (const auto& t : golden_file.tensors()) {
      if (!is_floating(t.dtype)) {
        EXPECT_EQ(t.name, "bert.embeddings.position_ids");
      }
    }
  }
  fs::remove_all(tmp);
}

TEST(Init, StatisticsMatchHuggingFace) {
  ModelConfig config = load_model_config(kGolden + "bert-tiny/model/config.json");
  config.initializer_range = 0.05;
  config.pad_token_id = 3;
  ModelState state(config);
  init_params(state.layout, config, 42, state.params.data());
  for (const ParamEntry& e : state.layout.entries()) {
    const float* p = state.params.data() + e.offset;
    if (e.init == ParamInit::kZero) {
      for (std::int64_t i = 0; i < e.size; ++i) ASSERT_EQ(p[i], 0.0f) << e.name;
      continue;
    }
    if (e.init == ParamInit::kOne) {
      for (std::int64_t i = 0; i < e.size; ++i) ASSERT_EQ(p[i], 1.0f) << e.name;
      continue;
    }
    std::int64_t skip_begin = 0, skip_end = 0;  // the [PAD] row, checked below
    if (e.role == Role::kWordEmb) {
      skip_begin = config.pad_token_id * config.hidden;
      skip_end = skip_begin + config.hidden;
      for (std::int64_t i = skip_begin; i < skip_end; ++i) ASSERT_EQ(p[i], 0.0f);
    }
    double sum = 0, sum_sq = 0;
    std::int64_t n = 0;
    for (std::int64_t i = 0; i < e.size; ++i) {
      if (i >= skip_begin && i < skip_end) continue;
      sum += p[i];
      sum_sq += double{p[i]} * p[i];
      ++n;
    }
    // For n draws of normal(0, s): the sample mean has standard error s/sqrt(n), the sample
    // std about s/sqrt(2n). Six standard errors: a false failure has odds below 1e-8 per check.
    const double s = config.initializer_range;
    double mean = sum / n;
    double std_dev = std::sqrt(sum_sq / n - mean * mean);
    EXPECT_NEAR(mean, 0.0, 6 * s / std::sqrt(double(n))) << e.name;
    EXPECT_NEAR(std_dev, s, 6 * s / std::sqrt(2.0 * n)) << e.name;
  }
}

TEST(Init, TailsAreGaussian) {
  // Fraction beyond 2 sigma over ~2M word-embedding draws: 0.0455 with standard error
  // sqrt(0.0455 * 0.9545 / n) ~ 1.5e-4; a uniform or clipped generator misses by far more.
  ModelConfig config = load_model_config(kGolden + "distilbert-tiny/model/config.json");
  ModelState state(config);
  init_params(state.layout, config, 1, state.params.data());
  const ParamEntry& e = state.layout.entry(Role::kWordEmb);
  std::int64_t beyond = 0;
  for (std::int64_t i = 0; i < e.size; ++i) {
    beyond += std::fabs(state.params[e.offset + i]) > 2 * config.initializer_range;
  }
  double fraction = double(beyond) / e.size;
  EXPECT_NEAR(fraction, 0.0455, 6 * std::sqrt(0.0455 * 0.9545 / e.size));
}

TEST(Init, DeterministicAcrossThreadCounts) {
  ModelConfig config = load_model_config(kGolden + "distilbert-tiny/model/config.json");
  ModelState a(config), b(config), c(config);
  const int threads = num_threads();
  set_num_threads(1);
  init_params(a.layout, config, 123, a.params.data());
  set_num_threads(std::max(2, threads));
  init_params(b.layout, config, 123, b.params.data());
  init_params(c.layout, config, 124, c.params.data());
  set_num_threads(threads);
  const std::size_t bytes = a.params.size() * sizeof(float);
  EXPECT_EQ(std::memcmp(a.params.data(), b.params.data(), bytes), 0);
  EXPECT_NE(std::memcmp(a.params.data(), c.params.data(), bytes), 0);
  // Tensors draw from separate streams: q and k weights (same shape) differ.
  const ParamEntry& q = a.layout.entry(Role::kQW, 0);
  const ParamEntry& k = a.layout.entry(Role::kKW, 0);
  EXPECT_NE(std::memcmp(a.params.data() + q.offset, a.params.data() + k.offset, q.size * 4), 0);
  // One tensor alone gets the same values as in the full initialisation.
  ModelState d(config);
  const std::size_t idx = &q - a.layout.entries().data();
  init_param_tensor(d.layout, config, idx, 123, d.params.data());
  EXPECT_EQ(std::memcmp(a.params.data() + q.offset, d.params.data() + q.offset, q.size * 4), 0);
}

// ModernBERT's _init_weights: normals truncated at ±initializer_cutoff_factor·std, Wo of
// attention and FFN and the head's dense at std/√(2·layers), the classifier at hidden^-½,
// Wqkv/Wi/embeddings at initializer_range, the padding row drawn like the others.
TEST(Init, ModernBertScheme) {
  ModelConfig c = load_model_config(kGolden + "modernbert-tiny/model/config.json");
  c.hidden = 256;
  c.heads = 4;
  c.intermediate = 384;
  c.layers = 8;
  c.initializer_range = 0.02;
  ModelState state(c);
  init_params(state.layout, state.config, 3, state.params.data());
  const double out_std = 0.02 / std::sqrt(16.0), cls_std = 1.0 / 16.0;
  for (const ParamEntry& e : state.layout.entries()) {
    if (e.init != ParamInit::kNormal) continue;
    const double want = e.role == Role::kOW || e.role == Role::kFf2W || e.role == Role::kPreW
                            ? out_std
                        : e.role == Role::kClsW ? cls_std
                                                : 0.02;
    const float* v = state.params.data() + e.offset;
    double sq = 0, worst = 0;
    for (std::int64_t i = 0; i < e.size; ++i) {
      sq += double{v[i]} * v[i];
      worst = std::max(worst, std::fabs(double{v[i]}));
    }
    EXPECT_LE(worst, 2.0 * want) << e.name;  // truncated at 2σ
    // A normal truncated at ±2σ has standard deviation 0.880σ.
    const double sd = std::sqrt(sq / e.size);
    if (e.size >= 1000) {
      EXPECT_NEAR(sd, 0.880 * want, 0.1 * want) << e.name;
    }
  }
  const ParamEntry& word = state.layout.entry(Role::kWordEmb);
  const float* pad = state.params.data() + word.offset + std::int64_t{c.pad_token_id} * c.hidden;
  EXPECT_NE(std::count(pad, pad + c.hidden, 0.0f), c.hidden) << "the padding row is drawn";
}

}  // namespace
}  // namespace bertfit
