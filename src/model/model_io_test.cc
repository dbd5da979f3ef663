// Model folder I/O: loading the golden transformers folders (values equal the file), every
// kind of broken or partial checkpoint, base-model names with a fresh head, save -> load, and
// every form transformers saves weights in (pytorch_model.bin in fp32, fp16 and bf16, sharded
// PyTorch and safetensors checkpoints) loading the same parameters, in transformers' order of
// preference.
#include "model/model_io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>

#include "base/error.h"
#include "base/file.h"
#include "io/safetensors.h"
#include "model/family.h"
#include "model/init.h"
#include "model/test_config.h"
#include "tests/util/errors.h"
#include "tests/util/torch_fixtures.h"

namespace bertfit {
namespace {

namespace fs = std::filesystem;
const std::string kGolden = std::string(BERTFIT_SHARED_DIR) + "/golden/";

using testing::error_of;

class ModelIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           cat("bertfit_model_io_", ::getpid(), "_",
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A copy of a golden model folder whose tensors pass through `rename` (nullopt drops one),
  // plus `extra` tensors.
  std::string rewritten(const std::string& model,
                        const std::function<std::optional<std::string>(const std::string&)>& rename,
                        std::vector<TensorToWrite> extra = {}) {
    std::string out = (dir_ / (model + "-copy")).string();
    fs::create_directories(out);
    for (const char* f : {"config.json", "vocab.txt"}) {
      fs::copy_file(kGolden + model + "/model/" + f, out + "/" + f);
    }
    auto src = SafetensorsFile::open(kGolden + model + "/model/model.safetensors");
    std::vector<std::string> names;
    for (const auto& t : src.tensors()) names.push_back(t.name);
    std::vector<TensorToWrite> tensors;
    std::vector<std::string> kept;  // names must outlive `tensors`
    kept.reserve(names.size());
    for (const auto& t : src.tensors()) {
      auto name = rename(t.name);
      if (!name) continue;
      kept.push_back(*name);
      tensors.push_back({kept.back(), t.dtype, t.shape, src.bytes(t).data()});
    }
    for (auto& t : extra) tensors.push_back(t);
    write_safetensors(out + "/model.safetensors", tensors);
    return out;
  }

  fs::path dir_;
};

// Every parameter equals the file's tensor, bit for bit.
void expect_params_equal_file(const ModelState& state, const std::string& path) {
  auto file = SafetensorsFile::open(path);
  for (const ParamEntry& e : state.layout.entries()) {
    const TensorInfo* t = file.find(e.name);
    ASSERT_NE(t, nullptr) << e.name;
    ASSERT_EQ(t->shape, e.shape) << e.name;
    std::vector<float> want(e.size);
    file.read_f32(*t, want.data());
    EXPECT_EQ(std::memcmp(want.data(), state.params.data() + e.offset, e.size * 4), 0) << e.name;
  }
}

TEST_F(ModelIo, LoadsBothGoldenFolders) {
  for (const char* model : {"distilbert-tiny", "bert-tiny"}) {
    ModelState state = load_model(kGolden + model + "/model");
    EXPECT_EQ(state.config.hidden, 64);
    EXPECT_EQ(state.params.size(), static_cast<std::size_t>(state.layout.total()));
    expect_params_equal_file(state, kGolden + model + "/model/model.safetensors");
  }
  ModelState bert = load_model(kGolden + std::string("bert-tiny/model"));
  EXPECT_EQ(bert.config.num_labels, 3);
  EXPECT_EQ(bert.hf_config["model_type"], "bert");
}

// The RoBERTa family's folders load bit for bit, and a saved one carries its tokenizer files
// unchanged (transformers' AutoTokenizer then reads it); without them saving is refused before
// anything is written.
TEST_F(ModelIo, RobertaFamilyFoldersRoundTripWithTheirTokenizerFiles) {
  for (const char* model : {"roberta-tiny", "xlmr-tiny"}) {
    const std::string src = kGolden + model + "/model";
    ModelState state = load_model(src);
    expect_params_equal_file(state, src + "/model.safetensors");
    const std::string out = (dir_ / model).string();
    save_model(out, state, src);
    ModelState back = load_model(out);
    expect_params_equal_file(back, src + "/model.safetensors");
    EXPECT_EQ(back.config, state.config);
    int copied = 0;
    for (const char* f : {"vocab.json", "merges.txt", "sentencepiece.bpe.model", "tokenizer.json",
                          "tokenizer_config.json", "special_tokens_map.json"}) {
      if (!fs::exists(src + "/" + f)) continue;
      ++copied;
      EXPECT_EQ(read_file(out + "/" + f), read_file(src + "/" + f)) << model << " " << f;
    }
    EXPECT_GE(copied, 2) << model;
    EXPECT_FALSE(fs::exists(out + "/vocab.txt")) << model;
  }
  ModelState state = load_model(kGolden + std::string("roberta-tiny/model"));
  const std::string refused = (dir_ / "refused").string();
  const std::string error =
      error_of([&] { save_model(refused, state, kGolden + std::string("bert-tiny/model")); });
  EXPECT_NE(error.find("a roberta model carries its tokenizer's files (vocab.json and merges.txt"),
            std::string::npos)
      << error;
  EXPECT_FALSE(fs::exists(refused));
}

TEST_F(ModelIo, MissingFolderFileAndWeights) {
  std::string missing = (dir_ / "nope").string();
  EXPECT_NE(error_of([&] { load_model(missing); }).find(missing), std::string::npos);
  std::string file = (dir_ / "file").string();
  write_file_atomic(file, "x");
  EXPECT_NE(error_of([&] { load_model(file); }).find("not a folder"), std::string::npos);

  std::string empty = (dir_ / "empty").string();
  fs::create_directories(empty);
  EXPECT_NE(error_of([&] { load_model(empty); }).find("config.json"), std::string::npos);

  fs::copy_file(kGolden + "distilbert-tiny/model/config.json", empty + "/config.json");
  std::string msg = error_of([&] { load_model(empty); });
  EXPECT_NE(msg.find("no model.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pytorch_model.bin"), std::string::npos) << msg;
  write_file_atomic(empty + "/pytorch_model.bin", "pickle");
  msg = error_of([&] { load_model(empty); });
  EXPECT_NE(msg.find(empty + "/pytorch_model.bin: not a PyTorch checkpoint"), std::string::npos)
      << msg;
}

TEST_F(ModelIo, MissingTensorWrongShapeWrongDtype) {
  const std::string removed = "distilbert.transformer.layer.1.ffn.lin2.bias";
  std::string dir = rewritten("distilbert-tiny", [&](const std::string& n) {
    return n == removed ? std::nullopt : std::optional(n);
  });
  std::string msg = error_of([&] { load_model(dir); });
  EXPECT_NE(msg.find("'" + removed + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir + "/model.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;

  // A config whose FFN width disagrees with the checkpoint.
  fs::remove_all(dir);
  dir = rewritten("bert-tiny", [](const std::string& n) { return std::optional(n); });
  std::string config = read_file(dir + "/config.json");
  config.replace(config.find("\"intermediate_size\": 192"), 24, "\"intermediate_size\": 128");
  write_file_atomic(dir + "/config.json", config);
  msg = error_of([&] { load_model(dir); });
  EXPECT_NE(msg.find("'bert.encoder.layer.0.intermediate.dense.weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[192, 64]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected [128, 64]"), std::string::npos) << msg;

  fs::remove_all(dir);
  std::vector<std::int64_t> ids(64, 7);
  dir = rewritten(
      "distilbert-tiny",
      [](const std::string& n) {
        return n == "distilbert.embeddings.LayerNorm.bias" ? std::nullopt : std::optional(n);
      },
      {{"distilbert.embeddings.LayerNorm.bias", SafetensorsDType::kI64, Shape{64}, ids.data()}});
  msg = error_of([&] { load_model(dir); });
  EXPECT_NE(msg.find("'distilbert.embeddings.LayerNorm.bias'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("I64"), std::string::npos) << msg;
}

TEST_F(ModelIo, ConfigOfTheOtherArchitectureIsNamed) {
  std::string dir = rewritten("bert-tiny", [](const std::string& n) { return std::optional(n); });
  fs::copy_file(kGolden + "distilbert-tiny/model/config.json", dir + "/config.json",
                fs::copy_options::overwrite_existing);
  std::string msg = error_of([&] { load_model(dir); });
  EXPECT_NE(msg.find("model_type distilbert"), std::string::npos) << msg;
}

TEST_F(ModelIo, BaseModelNamesGetAFreshHead) {
  std::string dir = rewritten("distilbert-tiny", [](const std::string& n) {
    const std::string prefix = "distilbert.";
    if (n.rfind(prefix, 0) != 0) return std::optional<std::string>();  // drop the head
    return std::optional(n.substr(prefix.size()));
  });
  ModelState state = load_model(dir);
  ModelState golden = load_model(kGolden + "distilbert-tiny/model");
  const auto& cls_w = state.layout.entry(Role::kClsW);
  for (const ParamEntry& e : state.layout.entries()) {
    bool head = e.layer == state.layout.num_layers();
    const float* got = state.params.data() + e.offset;
    bool same = std::memcmp(got, golden.params.data() + e.offset, e.size * 4) == 0;
    if (!head) {
      EXPECT_TRUE(same) << e.name;
    } else if (e.init == ParamInit::kZero) {
      EXPECT_TRUE(std::all_of(got, got + e.size, [](float v) { return v == 0.0f; })) << e.name;
    } else {
      EXPECT_FALSE(same) << e.name;
    }
  }
  // The fresh classifier weight: normal(0, 0.02) over 128 values; 6 standard errors of the
  // sample std (0.02 / sqrt(2 * 128) = 0.00125) bound it.
  double ss = 0;
  for (std::int64_t i = 0; i < cls_w.size; ++i) ss += std::pow(state.params[cls_w.offset + i], 2);
  EXPECT_NEAR(std::sqrt(ss / cls_w.size), 0.02, 6 * 0.00125);
}

TEST_F(ModelIo, MissingPoolerOfABertBaseModelIsInitialised) {
  std::string dir = rewritten("bert-tiny", [](const std::string& n) {
    if (n.rfind("bert.pooler", 0) == 0 || n.rfind("classifier", 0) == 0) {
      return std::optional<std::string>();
    }
    return std::optional(n.substr(5));
  });
  ModelState state = load_model(dir);
  const auto& pooler_b = state.layout.entry(Role::kPreB);
  for (std::int64_t i = 0; i < pooler_b.size; ++i) EXPECT_EQ(state.params[pooler_b.offset + i], 0);
}

TEST_F(ModelIo, ClassifierOfAnotherSizeIsRefusedOrStartedAnew) {
  const std::string dir = kGolden + "distilbert-tiny/model";
  ASSERT_EQ(checkpoint_head_outputs(dir, load_model_config(dir + "/config.json")),
            std::optional<int>(2));
  ModelState golden = load_model(dir);
  ModelConfig three = golden.config;
  three.num_labels = 3;
  three.id2label = {"a", "b", "c"};
  std::string msg = error_of([&] { load_model(dir, {.config = &three}); });
  EXPECT_NE(msg.find("'classifier.weight' has shape [2, 64], expected [3, 64]"), std::string::npos)
      << msg;
  ModelState state = load_model(dir, {.config = &three, .reinit_mismatched_head = true});
  EXPECT_EQ(state.config.id2label, three.id2label);
  for (const ParamEntry& e : state.layout.entries()) {
    if (e.role == Role::kClsW || e.role == Role::kClsB) continue;
    const ParamEntry& g = golden.layout.entries()[&e - state.layout.entries().data()];
    EXPECT_EQ(
        std::memcmp(state.params.data() + e.offset, golden.params.data() + g.offset, e.size * 4), 0)
        << e.name;
  }
  const ParamEntry& cls_b = state.layout.entry(Role::kClsB);
  for (std::int64_t i = 0; i < cls_b.size; ++i) EXPECT_EQ(state.params[cls_b.offset + i], 0);
}

TEST_F(ModelIo, BaseModelHasNoHeadOutputs) {
  std::string dir = rewritten("bert-tiny", [](const std::string& n) {
    return n.rfind("classifier", 0) == 0 ? std::nullopt : std::optional(n);
  });
  const ModelConfig bert = load_model_config(kGolden + "bert-tiny/model/config.json");
  EXPECT_EQ(checkpoint_head_outputs(dir, bert), std::nullopt);
  EXPECT_EQ(checkpoint_head_outputs(kGolden + "bert-tiny/model", bert), std::optional<int>(3));
  // The RoBERTa family's output layer is classifier.out_proj (issue 32: a trained head missed).
  const std::string roberta = kGolden + "roberta-tiny/model";
  EXPECT_EQ(checkpoint_head_outputs(roberta, load_model_config(roberta + "/config.json")),
            std::optional<int>(2));
}

TEST_F(ModelIo, NonFiniteWeightIsRefusedNamingTheTensor) {
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    auto src = SafetensorsFile::open(kGolden + "distilbert-tiny/model/model.safetensors");
    const TensorInfo* t = src.find("distilbert.transformer.layer.1.ffn.lin2.bias");
    ASSERT_NE(t, nullptr);
    std::vector<float> values(t->shape.numel());
    src.read_f32(*t, values.data());
    values[5] = bad;
    std::string dir = rewritten("distilbert-tiny",
                                [](const std::string& n) {
                                  return n == "distilbert.transformer.layer.1.ffn.lin2.bias"
                                             ? std::nullopt
                                             : std::optional(n);
                                },
                                {{"distilbert.transformer.layer.1.ffn.lin2.bias",
                                  SafetensorsDType::kF32, t->shape, values.data()}});
    std::string msg = error_of([&] { load_model(dir); });
    EXPECT_NE(msg.find("'distilbert.transformer.layer.1.ffn.lin2.bias'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("element 5"), std::string::npos) << msg;
    fs::remove_all(dir);
  }
}

TEST_F(ModelIo, HalfAHeadModuleIsAnError) {
  std::string dir = rewritten("distilbert-tiny", [](const std::string& n) {
    return n == "classifier.bias" ? std::nullopt : std::optional(n);
  });
  std::string msg = error_of([&] { load_model(dir); });
  EXPECT_NE(msg.find("'classifier'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("incomplete"), std::string::npos) << msg;
}

TEST_F(ModelIo, ExtraTensorsAreIgnored) {
  std::vector<float> extra(64 * 3, 0.5f);
  std::string dir =
      rewritten("distilbert-tiny", [](const std::string& n) { return std::optional(n); },
                {{"vocab_transform.weight", SafetensorsDType::kF32, Shape{3, 64}, extra.data()}});
  ModelState state = load_model(dir);
  expect_params_equal_file(state, kGolden + "distilbert-tiny/model/model.safetensors");
}

TEST_F(ModelIo, SaveThenLoadIsExact) {
  for (const char* model : {"distilbert-tiny", "bert-tiny"}) {
    ModelState state = load_model(kGolden + model + "/model");
    std::string out = (dir_ / model).string();
    save_model(out, state, kGolden + model + "/model");
    ModelState back = load_model(out);
    EXPECT_EQ(back.config, state.config);
    ASSERT_EQ(back.params.size(), state.params.size());
    EXPECT_EQ(std::memcmp(back.params.data(), state.params.data(), state.params.size() * 4), 0);
    EXPECT_EQ(read_file(out + "/vocab.txt"), read_file(kGolden + model + "/model/vocab.txt"));
    auto tok = nlohmann::json::parse(read_file(out + "/tokenizer_config.json"));
    EXPECT_EQ(tok["do_lower_case"], true);
    EXPECT_EQ(tok["model_max_length"], 512);
    EXPECT_EQ(tok["tokenizer_class"], model[0] == 'b' ? "BertTokenizer" : "DistilBertTokenizer");
    auto special = nlohmann::json::parse(read_file(out + "/special_tokens_map.json"));
    EXPECT_EQ(special["pad_token"], "[PAD]");
    // Tensors in layout order, F32, with format pt.
    auto file = SafetensorsFile::open(out + "/model.safetensors");
    EXPECT_EQ(file.metadata().at("format"), "pt");
    ASSERT_EQ(file.tensors().size(), state.layout.entries().size());
    for (std::size_t i = 0; i < file.tensors().size(); ++i) {
      EXPECT_EQ(file.tensors()[i].name, state.layout.entries()[i].name);
      EXPECT_EQ(file.tensors()[i].dtype, SafetensorsDType::kF32);
    }
  }
}

TEST_F(ModelIo, SaveErrors) {
  ModelState state = load_model(kGolden + "distilbert-tiny/model");
  std::string file = (dir_ / "a-file").string();
  write_file_atomic(file, "x");
  EXPECT_NE(error_of([&] {
              save_model(file, state, kGolden + "distilbert-tiny/model");
            }).find("not a folder"),
            std::string::npos);
  std::string vocab = (dir_ / "vocab.txt").string();
  std::string big;
  for (int i = 0; i < 30523; ++i) big += cat("tok", i, "\n");
  write_file_atomic(vocab, big);
  std::string out = (dir_ / "out").string();
  std::string msg = error_of([&] { save_model(out, state, vocab); });
  EXPECT_NE(msg.find("30523 tokens"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(out));  // nothing written
  EXPECT_NE(
      error_of([&] { save_model(out, state, (dir_ / "none.txt").string()); }).find("none.txt"),
      std::string::npos);
}

// ---- Every form transformers saves weights in loads the same parameters.

// A folder `name` holding a golden model's config.json and vocab.txt, and no weights.
std::string folder_of(const fs::path& root, const std::string& model, const std::string& name) {
  std::string out = (root / name).string();
  fs::create_directories(out);
  for (const char* f : {"config.json", "vocab.txt"}) {
    fs::copy_file(kGolden + model + "/model/" + f, out + "/" + f);
  }
  return out;
}

void expect_same_params(const ModelState& got, const ModelState& want) {
  EXPECT_EQ(got.config, want.config);
  ASSERT_EQ(got.params.size(), want.params.size());
  for (const ParamEntry& e : want.layout.entries()) {
    EXPECT_EQ(std::memcmp(got.params.data() + e.offset, want.params.data() + e.offset, e.size * 4),
              0)
        << e.name;
  }
}

// Writes the tensors of safetensors file `src` into `shards` shards named as save_pretrained
// names them, with model.safetensors.index.json, in `dir`.
void write_sharded_safetensors(const std::string& src, const std::string& dir, int shards) {
  auto file = SafetensorsFile::open(src);
  const auto& all = file.tensors();
  const std::size_t per = (all.size() + shards - 1) / shards;
  nlohmann::json weight_map = nlohmann::json::object();
  for (int k = 0; k < shards; ++k) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", k + 1, shards);
    std::vector<TensorToWrite> part;
    for (std::size_t i = k * per; i < all.size() && i < (k + 1) * per; ++i) {
      part.push_back({all[i].name, all[i].dtype, all[i].shape, file.bytes(all[i]).data()});
      weight_map[all[i].name] = name;
    }
    write_safetensors(dir + "/" + name, part);
  }
  write_file_atomic(
      dir + "/model.safetensors.index.json",
      nlohmann::json({{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}).dump(2));
}

TEST_F(ModelIo, ShardedSafetensorsLoadAsTheSingleFile) {
  for (const char* model : {"distilbert-tiny", "bert-tiny"}) {
    std::string dir = folder_of(dir_, model, std::string(model) + "-sharded");
    write_sharded_safetensors(kGolden + model + "/model/model.safetensors", dir, 3);
    EXPECT_EQ(model_weights_path(dir), dir + "/model.safetensors.index.json");
    expect_same_params(load_model(dir), load_model(kGolden + model + "/model"));
  }
  // A tensor missing from every shard is named with the index.
  std::string dir = rewritten("distilbert-tiny", [](const std::string& n) {
    return n == "distilbert.embeddings.LayerNorm.bias" ? std::nullopt : std::optional(n);
  });
  write_sharded_safetensors(dir + "/model.safetensors", dir, 2);
  fs::remove(dir + "/model.safetensors");
  std::string msg = error_of([&] { load_model(dir); });
  EXPECT_NE(msg.find(dir + "/model.safetensors.index.json: tensor "
                           "'distilbert.embeddings.LayerNorm.bias' is missing"),
            std::string::npos)
      << msg;
}

TEST_F(ModelIo, WeightsAreChosenInTransformersOrder) {
  // model.safetensors, then its index, then pytorch_model.bin, then its index: the first that
  // exists is read and the others never opened (here they are not even checkpoints).
  std::string dir = folder_of(dir_, "bert-tiny", "order");
  write_file_atomic(dir + "/pytorch_model.bin.index.json", "not json");
  EXPECT_EQ(model_weights_path(dir), dir + "/pytorch_model.bin.index.json");
  EXPECT_NE(error_of([&] { load_model(dir); }).find(dir + "/pytorch_model.bin.index.json"),
            std::string::npos);
  write_file_atomic(dir + "/pytorch_model.bin", "not a zip");
  EXPECT_EQ(model_weights_path(dir), dir + "/pytorch_model.bin");
  EXPECT_NE(error_of([&] { load_model(dir); }).find(dir + "/pytorch_model.bin: not a PyTorch"),
            std::string::npos);
  write_sharded_safetensors(kGolden + "bert-tiny/model/model.safetensors", dir, 2);
  EXPECT_EQ(model_weights_path(dir), dir + "/model.safetensors.index.json");
  ModelState golden = load_model(kGolden + "bert-tiny/model");
  expect_same_params(load_model(dir), golden);
  fs::copy_file(kGolden + "bert-tiny/model/model.safetensors", dir + "/model.safetensors");
  fs::remove(dir + "/model-00001-of-00002.safetensors");  // the index is not read any more
  EXPECT_EQ(model_weights_path(dir), dir + "/model.safetensors");
  expect_same_params(load_model(dir), golden);
}

class ModelIoTorch : public ModelIo {
 protected:
  void SetUp() override {
    ModelIo::SetUp();
    if (testing::python_with_torch().empty()) GTEST_SKIP() << testing::kNoTorch;
  }
  // make_torch_checkpoints.py model SRC DTYPE SHARDS PT_DIR [ST_DIR].
  static void convert(const std::string& src, const std::string& dtype, int shards,
                      const std::string& pt_dir, const std::string& st_dir = "") {
    ASSERT_TRUE(testing::make_torch_checkpoints(
        cat("model ", src, " ", dtype, " ", shards, " ", pt_dir, " ", st_dir)));
  }
};

TEST_F(ModelIoTorch, PytorchModelBinLoadsAsItsSafetensors) {
  // DistilBERT's file also holds vocab_projector.weight tied to the word embeddings (one
  // storage, ignored on load); BERT's holds the int64 position_ids buffer (skipped).
  for (const char* model : {"distilbert-tiny", "bert-tiny"}) {
    std::string dir = folder_of(dir_, model, std::string(model) + "-pt");
    convert(kGolden + model + "/model/model.safetensors", "f32", 1, dir);
    EXPECT_EQ(model_weights_path(dir), dir + "/pytorch_model.bin");
    expect_same_params(load_model(dir), load_model(kGolden + model + "/model"));
  }
}

TEST_F(ModelIoTorch, ShardedPytorchLoadsAsTheSingleFile) {
  std::string dir = folder_of(dir_, "bert-tiny", "pt-sharded");
  convert(kGolden + "bert-tiny/model/model.safetensors", "f32", 3, dir);
  EXPECT_TRUE(fs::exists(dir + "/pytorch_model-00003-of-00003.bin"));
  EXPECT_EQ(model_weights_path(dir), dir + "/pytorch_model.bin.index.json");
  expect_same_params(load_model(dir), load_model(kGolden + "bert-tiny/model"));
}

TEST_F(ModelIoTorch, HalfAndBfloat16CheckpointsLoadAsFp32) {
  const ModelState golden = load_model(kGolden + "distilbert-tiny/model");
  for (const char* dtype : {"f16", "bf16"}) {
    std::string pt = folder_of(dir_, "distilbert-tiny", std::string("pt-") + dtype);
    std::string st = folder_of(dir_, "distilbert-tiny", std::string("st-") + dtype);
    convert(kGolden + "distilbert-tiny/model/model.safetensors", dtype, 1, pt, st);
    ModelState from_pt = load_model(pt);
    // The same half-precision tensors written as safetensors load to the same fp32 values.
    expect_same_params(from_pt, load_model(st));
    // And they are the golden weights rounded once to the half type: a relative error of at most
    // half an ulp (2^-11 for fp16's 10-bit mantissa, 2^-8 for bf16's 7-bit one), plus, for fp16,
    // half its smallest subnormal (2^-25) for weights below its normal range (6.1e-5).
    const bool f16 = std::string(dtype) == "f16";
    const double rel = f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    const double tiny = f16 ? std::ldexp(1.0, -25) : 0.0;
    std::size_t changed = 0;
    for (std::size_t i = 0; i < golden.params.size(); ++i) {
      const double want = golden.params[i], got = from_pt.params[i];
      ASSERT_LE(std::abs(got - want), std::abs(want) * rel + tiny) << dtype << " element " << i;
      changed += got != want;
    }
    EXPECT_GT(changed, golden.params.size() / 2) << dtype;  // it did go through the half type
  }
}

TEST_F(ModelIoTorch, AModelMadeByInitLoadsFromEveryForm) {
  // What `bertfit init` does (cmd_init.cc): fresh parameters, saved as a model folder.
  ModelState state(small_test_config(model_family("bert"), 3));
  init_params(state.layout, state.config, 7, state.params.data());
  std::string vocab;
  for (int i = 0; i < 200; ++i) vocab += cat("tok", i, "\n");
  write_file_atomic((dir_ / "vocab.txt").string(), vocab);
  const std::string made = (dir_ / "made").string();
  save_model(made, state, (dir_ / "vocab.txt").string());

  for (int shards : {1, 2}) {
    const std::string dir = (dir_ / cat("made-pt-", shards)).string();
    fs::create_directories(dir);
    for (const char* f : {"config.json", "vocab.txt"}) fs::copy_file(made + "/" + f, dir + "/" + f);
    convert(made + "/model.safetensors", "f32", shards, dir);
    ModelState back = load_model(dir);
    ASSERT_EQ(back.params.size(), state.params.size());
    EXPECT_EQ(std::memcmp(back.params.data(), state.params.data(), state.params.size() * 4), 0)
        << shards << " shard(s)";
  }
}

TEST(ModelIoVocab, CountsLinesAsBertTokenizer) {
  EXPECT_EQ(count_vocab_lines(""), 0);
  EXPECT_EQ(count_vocab_lines("a\nb\n"), 2);
  EXPECT_EQ(count_vocab_lines("a\nb"), 2);
  EXPECT_EQ(count_vocab_lines("a\n\nb\n"), 3);
  EXPECT_EQ(count_vocab_lines(
                read_file(std::string(BERTFIT_SHARED_DIR) + "/data/vocab/bert-base-uncased.txt")),
            30522);
}

}  // namespace
}  // namespace bertfit
