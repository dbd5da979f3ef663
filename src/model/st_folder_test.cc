// read_sentence_transformer: the folders saved by sentence-transformers 2.2.2, synthetic
// folders for every pooling mode (and their concatenation order), Dense modules, prompts and the
// similarity function, and every rejection: one line that names the file and the key or module.
#include "model/st_folder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/file.h"
#include "tests/util/errors.h"
#include "tests/util/temp_dir.h"

namespace bertfit {
namespace {

using nlohmann::json;
using testing::error_of;
using testing::TempDir;

const std::string kGolden = std::string(BERTFIT_SHARED_DIR) + "/golden/";

void write_json(const std::string& path, const json& j) {
  make_directories(std::filesystem::path(path).parent_path().string());
  write_file_atomic(path, j.dump(2));
}

// modules.json entries for (short type, path) pairs, as sentence-transformers writes them.
json modules_json(const std::vector<std::pair<std::string, std::string>>& modules) {
  json list = json::array();
  for (std::size_t i = 0; i < modules.size(); ++i) {
    list.push_back({{"idx", i},
                    {"name", std::to_string(i)},
                    {"path", modules[i].second},
                    {"type", "sentence_transformers.models." + modules[i].first}});
  }
  return list;
}

json pooling_config(int dim, bool cls, bool mean, bool max, bool sqrt_len) {
  return {{"word_embedding_dimension", dim},
          {"pooling_mode_cls_token", cls},
          {"pooling_mode_mean_tokens", mean},
          {"pooling_mode_max_tokens", max},
          {"pooling_mode_mean_sqrt_len_tokens", sqrt_len}};
}

json dense_config(int in, int out) {
  return {{"in_features", in},
          {"out_features", out},
          {"bias", true},
          {"activation_function", "torch.nn.modules.activation.Tanh"}};
}

// A folder as sentence-transformers 2.2.2 saves Transformer + Pooling(mean, dim 8) + Normalize.
void write_st_folder(const TempDir& d) {
  write_json(
      d / "modules.json",
      modules_json({{"Transformer", ""}, {"Pooling", "1_Pooling"}, {"Normalize", "2_Normalize"}}));
  write_json(d / "sentence_bert_config.json", {{"max_seq_length", 128}, {"do_lower_case", true}});
  write_json(d / "1_Pooling/config.json", pooling_config(8, false, true, false, false));
}

SentenceTransformerSpec read_spec(const TempDir& d) {
  std::optional<SentenceTransformerSpec> spec = read_sentence_transformer(d.path());
  EXPECT_TRUE(spec.has_value());
  return spec.value_or(SentenceTransformerSpec{});
}

// The folder's error: one line naming `file` (inside the folder) and each of `parts`.
void expect_error(const TempDir& d, const std::string& file,
                  const std::vector<std::string>& parts) {
  std::string msg = error_of([&] { read_sentence_transformer(d.path()); });
  ASSERT_FALSE(msg.empty()) << "no error";
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_NE(msg.find(d / file), std::string::npos) << msg;
  for (const std::string& part : parts) EXPECT_NE(msg.find(part), std::string::npos) << msg;
}

TEST(StFolder, GoldenMeanNormalize) {
  std::optional<SentenceTransformerSpec> spec =
      read_sentence_transformer(kGolden + "st-bert-mean-tiny/model");
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->pooling, std::vector<Pooling>{Pooling::kMean});
  EXPECT_EQ(spec->word_embedding_dimension, 16);
  EXPECT_TRUE(spec->include_prompt);
  EXPECT_TRUE(spec->normalize);  // 2_Normalize is listed but was never written (nothing to save)
  EXPECT_TRUE(spec->dense.empty());
  EXPECT_EQ(spec->max_seq_length, 64);
  EXPECT_FALSE(spec->do_lower_case);
  EXPECT_TRUE(spec->prompts.empty());  // 2.2.2 writes no prompts
  EXPECT_EQ(spec->default_prompt_name, "");
  EXPECT_EQ(spec->similarity_fn_name, "cosine");
  EXPECT_EQ(spec->transformer_path, "");
  EXPECT_EQ(sentence_embedding_dimension(*spec), 16);
}

// tests/fixtures/st/xlmr-cls-max-tiny: XLM-R with CLS and max pooling, no Normalize, as 2.2.2
// saved it (tests/fixtures/make_st_fixtures.py).
TEST(StFolder, FixtureClsMaxWithoutNormalize) {
  std::optional<SentenceTransformerSpec> spec = read_sentence_transformer(
      std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/st/xlmr-cls-max-tiny/model");
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->pooling, (std::vector<Pooling>{Pooling::kCls, Pooling::kMax}));
  EXPECT_EQ(spec->word_embedding_dimension, 16);
  EXPECT_FALSE(spec->normalize);
  EXPECT_TRUE(spec->dense.empty());
  EXPECT_EQ(spec->max_seq_length, 64);
  EXPECT_EQ(sentence_embedding_dimension(*spec), 32);
}

TEST(StFolder, PlainEncoderFolderIsNotOne) {
  EXPECT_FALSE(read_sentence_transformer(kGolden + "bert-tiny/model").has_value());
}

TEST(StFolder, SettingsOfTheTransformerModule) {
  TempDir d;
  write_st_folder(d);
  SentenceTransformerSpec spec = read_spec(d);
  EXPECT_EQ(spec.max_seq_length, 128);
  EXPECT_TRUE(spec.do_lower_case);
  // null: the encoder's own limit; the older file names; no file at all.
  write_json(d / "sentence_bert_config.json", {{"max_seq_length", nullptr}});
  EXPECT_EQ(read_spec(d).max_seq_length, std::nullopt);
  std::filesystem::remove(d / "sentence_bert_config.json");
  write_json(d / "sentence_xlm-roberta_config.json",
             {{"max_seq_length", 256}, {"model_args", {{"trust_remote_code", true}}}});
  EXPECT_EQ(read_spec(d).max_seq_length, 256);
  std::filesystem::remove(d / "sentence_xlm-roberta_config.json");
  spec = read_spec(d);
  EXPECT_EQ(spec.max_seq_length, std::nullopt);
  EXPECT_FALSE(spec.do_lower_case);
  // A Transformer in a subfolder reads its config there.
  write_json(d / "modules.json",
             modules_json({{"Transformer", "0_Transformer"}, {"Pooling", "1_Pooling"}}));
  write_json(d / "0_Transformer/sentence_bert_config.json", {{"max_seq_length", 32}});
  spec = read_spec(d);
  EXPECT_EQ(spec.transformer_path, "0_Transformer");
  EXPECT_EQ(spec.max_seq_length, 32);
  EXPECT_FALSE(spec.normalize);
}

TEST(StFolder, SeveralPoolingModesInForwardOrder) {
  TempDir d;
  write_st_folder(d);
  json pooling = pooling_config(8, true, true, true, true);
  pooling["pooling_mode_lasttoken"] = true;
  pooling["pooling_mode_weightedmean_tokens"] = false;
  pooling["include_prompt"] = false;
  write_json(d / "1_Pooling/config.json", pooling);
  SentenceTransformerSpec spec = read_spec(d);
  // Pooling.forward appends cls, max, mean, mean_sqrt_len, lasttoken, whatever the key order.
  EXPECT_EQ(spec.pooling, (std::vector<Pooling>{Pooling::kCls, Pooling::kMax, Pooling::kMean,
                                                Pooling::kMeanSqrtLen, Pooling::kLastToken}));
  EXPECT_FALSE(spec.include_prompt);
  EXPECT_EQ(sentence_embedding_dimension(spec), 40);

  write_json(d / "1_Pooling/config.json", pooling_config(8, false, true, true, false));
  EXPECT_EQ(read_spec(d).pooling, (std::vector<Pooling>{Pooling::kMax, Pooling::kMean}));
  // An absent pooling_mode_mean_tokens is Pooling's default: on.
  write_json(d / "1_Pooling/config.json",
             {{"word_embedding_dimension", 8}, {"pooling_mode_cls_token", true}});
  EXPECT_EQ(read_spec(d).pooling, (std::vector<Pooling>{Pooling::kCls, Pooling::kMean}));
}

TEST(StFolder, ClsOnlyAndLastTokenOnly) {
  TempDir d;
  write_st_folder(d);
  write_json(d / "1_Pooling/config.json", pooling_config(8, true, false, false, false));
  SentenceTransformerSpec spec = read_spec(d);
  EXPECT_EQ(spec.pooling, std::vector<Pooling>{Pooling::kCls});
  EXPECT_EQ(sentence_embedding_dimension(spec), 8);

  json last = pooling_config(8, false, false, false, false);
  last["pooling_mode_lasttoken"] = true;
  write_json(d / "1_Pooling/config.json", last);
  EXPECT_EQ(read_spec(d).pooling, std::vector<Pooling>{Pooling::kLastToken});
  // pooling_mode by name overrides the flags (mean's default included).
  write_json(d / "1_Pooling/config.json",
             {{"word_embedding_dimension", 8}, {"pooling_mode", "LastToken"}});
  EXPECT_EQ(read_spec(d).pooling, std::vector<Pooling>{Pooling::kLastToken});
}

TEST(StFolder, DenseModules) {
  TempDir d;
  write_st_folder(d);
  write_json(d / "modules.json", modules_json({{"Transformer", ""},
                                               {"Pooling", "1_Pooling"},
                                               {"Dense", "2_Dense"},
                                               {"Dense", "3_Dense"},
                                               {"Normalize", "4_Normalize"}}));
  write_json(d / "1_Pooling/config.json", pooling_config(8, true, true, false, false));
  write_json(d / "2_Dense/config.json", dense_config(16, 12));
  write_file_atomic(d / "2_Dense/pytorch_model.bin", "weights");
  json identity = dense_config(12, 4);
  identity["bias"] = false;
  identity["activation_function"] = "torch.nn.modules.linear.Identity";
  write_json(d / "3_Dense/config.json", identity);
  write_file_atomic(d / "3_Dense/pytorch_model.bin", "weights");
  write_file_atomic(d / "3_Dense/model.safetensors", "weights");
  SentenceTransformerSpec spec = read_spec(d);
  ASSERT_EQ(spec.dense.size(), 2u);
  EXPECT_EQ(spec.dense[0].in_features, 16);
  EXPECT_EQ(spec.dense[0].out_features, 12);
  EXPECT_TRUE(spec.dense[0].bias);
  EXPECT_EQ(spec.dense[0].activation, DenseActivation::kTanh);
  EXPECT_EQ(spec.dense[0].activation_name, "torch.nn.modules.activation.Tanh");
  EXPECT_EQ(spec.dense[0].path, "2_Dense");
  EXPECT_EQ(spec.dense[0].weights_file, d / "2_Dense/pytorch_model.bin");
  EXPECT_EQ(spec.dense[1].in_features, 12);
  EXPECT_FALSE(spec.dense[1].bias);
  EXPECT_EQ(spec.dense[1].activation, DenseActivation::kIdentity);
  EXPECT_EQ(spec.dense[1].weights_file, d / "3_Dense/model.safetensors");  // safetensors first
  EXPECT_TRUE(spec.normalize);
  EXPECT_EQ(sentence_embedding_dimension(spec), 4);
}

TEST(StFolder, PromptsAndSimilarity) {
  TempDir d;
  write_st_folder(d);
  write_json(d / "config_sentence_transformers.json",
             {{"__version__", {{"sentence_transformers", "3.0.1"}}},
              {"prompts", {{"query", "query: "}, {"document", "passage: "}}},
              {"default_prompt_name", "query"},
              {"similarity_fn_name", "dot"}});
  SentenceTransformerSpec spec = read_spec(d);
  EXPECT_EQ(spec.prompts,
            (std::map<std::string, std::string>{{"query", "query: "}, {"document", "passage: "}}));
  EXPECT_EQ(spec.default_prompt_name, "query");
  EXPECT_EQ(spec.similarity_fn_name, "dot");
  // null, as sentence-transformers writes an unset name: no default prompt, cosine.
  write_json(d / "config_sentence_transformers.json", {{"model_type", "SentenceTransformer"},
                                                       {"prompts", json::object()},
                                                       {"default_prompt_name", nullptr},
                                                       {"similarity_fn_name", nullptr}});
  spec = read_spec(d);
  EXPECT_TRUE(spec.prompts.empty());
  EXPECT_EQ(spec.default_prompt_name, "");
  EXPECT_EQ(spec.similarity_fn_name, "cosine");
}

TEST(StFolder, UnsupportedModulesNameModulesJson) {
  const std::vector<std::string> unsupported = {"WordWeights",          "LSTM",    "CNN",
                                                "WeightedLayerPooling", "Dropout", "LayerNorm"};
  for (const std::string& type : unsupported) {
    TempDir d;
    write_st_folder(d);
    write_json(d / "modules.json",
               modules_json({{"Transformer", ""}, {type, "1_" + type}, {"Pooling", "2_Pooling"}}));
    expect_error(d, "modules.json", {"module 1", type, "not supported", "bertfit runs"});
  }
  TempDir d;
  write_st_folder(d);
  json modules = modules_json({{"Transformer", ""}, {"Pooling", "1_Pooling"}});
  modules[1]["type"] = "my_package.MyPooling";
  write_json(d / "modules.json", modules);
  expect_error(d, "modules.json", {"module 1", "my_package.MyPooling", "not supported"});
}

TEST(StFolder, ModulesOutOfPlace) {
  TempDir d;
  write_st_folder(d);
  write_json(d / "modules.json",
             modules_json({{"Transformer", ""}, {"Pooling", "1_Pooling"}, {"Transformer", "2_T"}}));
  expect_error(d, "modules.json", {"module 2", "Transformer", "out of place", "bertfit runs"});
  write_json(d / "modules.json", modules_json({{"Pooling", "1_Pooling"}, {"Transformer", ""}}));
  expect_error(d, "modules.json", {"module 0", "Pooling", "out of place"});
  write_json(d / "modules.json", modules_json({{"Transformer", ""}, {"Dense", "1_Dense"}}));
  expect_error(d, "modules.json", {"module 1", "Dense", "out of place"});
  write_json(d / "modules.json", modules_json({{"Transformer", ""},
                                               {"Pooling", "1_Pooling"},
                                               {"Normalize", "2_Normalize"},
                                               {"Dense", "3_Dense"}}));
  expect_error(d, "modules.json", {"module 3", "Dense", "out of place"});
  write_json(
      d / "modules.json",
      modules_json({{"Transformer", ""}, {"Pooling", "1_Pooling"}, {"Pooling", "2_Pooling"}}));
  expect_error(d, "modules.json", {"module 2", "out of place"});
  write_json(d / "modules.json", modules_json({{"Transformer", ""}}));
  expect_error(d, "modules.json", {"no Pooling module"});
}

TEST(StFolder, MalformedModulesJson) {
  TempDir d;
  write_st_folder(d);
  write_file_atomic(d / "modules.json", "[{\"idx\": 0,");
  expect_error(d, "modules.json", {"invalid JSON"});
  write_json(d / "modules.json", {{"idx", 0}});
  expect_error(d, "modules.json", {"JSON array"});
  json modules = modules_json({{"Transformer", ""}, {"Pooling", "1_Pooling"}});
  modules[1].erase("path");
  write_json(d / "modules.json", modules);
  expect_error(d, "modules.json", {"module 1", "'path'"});
  modules = modules_json({{"Transformer", ""}, {"Pooling", "1_Pooling"}});
  modules[0]["type"] = 3;
  write_json(d / "modules.json", modules);
  expect_error(d, "modules.json", {"module 0", "'type'", "string"});
  modules = modules_json({{"Transformer", ""}, {"Pooling", "../1_Pooling"}});
  write_json(d / "modules.json", modules);
  expect_error(d, "modules.json", {"module 1", "'path'", "leaves the model folder"});
  modules = modules_json({{"Transformer", ""}, {"Pooling", "1_Pooling"}});
  modules[0]["kwargs"] = json::array({"task"});
  write_json(d / "modules.json", modules);
  expect_error(d, "modules.json", {"module 0", "kwargs"});
}

TEST(StFolder, PoolingConfigErrors) {
  TempDir d;
  write_st_folder(d);
  const std::string file = "1_Pooling/config.json";
  json weighted = pooling_config(8, false, false, false, false);
  weighted["pooling_mode_weightedmean_tokens"] = true;
  write_json(d / file, weighted);
  expect_error(d, file, {"weightedmean", "not supported"});
  write_json(d / file, {{"word_embedding_dimension", 8}, {"pooling_mode", "weightedmean"}});
  expect_error(d, file, {"weightedmean", "not supported"});
  write_json(d / file, {{"word_embedding_dimension", 8}, {"pooling_mode", "median"}});
  expect_error(d, file, {"'pooling_mode'", "median"});
  write_json(d / file, pooling_config(8, false, false, false, false));
  expect_error(d, file, {"no pooling mode"});
  write_json(d / file, {{"word_embedding_dimension", "8"}});
  expect_error(d, file, {"'word_embedding_dimension'", "integer"});
  write_json(d / file, {{"pooling_mode_mean_tokens", true}});
  expect_error(d, file, {"'word_embedding_dimension'", "missing"});
  write_json(d / file, {{"word_embedding_dimension", 8}, {"pooling_mode_cls_token", "yes"}});
  expect_error(d, file, {"'pooling_mode_cls_token'", "true or false"});
  write_json(d / file, {{"word_embedding_dimension", 8}, {"pooling_mode_median_tokens", true}});
  expect_error(d, file, {"'pooling_mode_median_tokens'", "Pooling"});
  std::filesystem::remove(d / file);
  expect_error(d, file, {"cannot open"});
}

TEST(StFolder, DenseConfigErrors) {
  TempDir d;
  write_st_folder(d);
  write_json(d / "modules.json",
             modules_json({{"Transformer", ""}, {"Pooling", "1_Pooling"}, {"Dense", "2_Dense"}}));
  const std::string file = "2_Dense/config.json";
  write_json(d / file, dense_config(16, 4));  // the pooling gives 8
  write_file_atomic(d / "2_Dense/pytorch_model.bin", "weights");
  expect_error(d, file, {"'in_features'", "16", "8"});
  json sigmoid = dense_config(8, 4);
  sigmoid["activation_function"] = "torch.nn.modules.activation.Sigmoid";
  write_json(d / file, sigmoid);
  expect_error(d, file, {"'activation_function'", "Sigmoid", "not supported"});
  json extra = dense_config(8, 4);
  extra["init_weight"] = nullptr;
  write_json(d / file, extra);
  expect_error(d, file, {"'init_weight'", "Dense"});
  json no_out = dense_config(8, 4);
  no_out.erase("out_features");
  write_json(d / file, no_out);
  expect_error(d, file, {"'out_features'", "missing"});
  write_json(d / file, dense_config(8, 4));
  std::filesystem::remove(d / "2_Dense/pytorch_model.bin");
  expect_error(d, "2_Dense", {"no weights", "pytorch_model.bin"});
}

TEST(StFolder, TransformerConfigErrors) {
  TempDir d;
  write_st_folder(d);
  const std::string file = "sentence_bert_config.json";
  write_json(d / file, {{"max_seq_length", "64"}});
  expect_error(d, file, {"'max_seq_length'", "integer"});
  write_json(d / file, {{"max_seq_length", 0}});
  expect_error(d, file, {"'max_seq_length'", "at least 1"});
  write_json(d / file, {{"do_lower_case", 1}});
  expect_error(d, file, {"'do_lower_case'", "true or false"});
  write_json(d / file, {{"max_seq_length", 64}, {"tokenizer_args", {{"model_max_length", 32}}}});
  expect_error(d, file, {"'tokenizer_args'", "not supported"});
  write_file_atomic(d / file, "[64]");
  expect_error(d, file, {"JSON object"});
}

TEST(StFolder, SentenceTransformersConfigErrors) {
  TempDir d;
  write_st_folder(d);
  const std::string file = "config_sentence_transformers.json";
  write_json(d / file, {{"similarity_fn_name", "cos"}});
  expect_error(d, file, {"'similarity_fn_name'", "cos", "cosine, dot, euclidean, manhattan"});
  write_json(d / file, {{"prompts", {{"query", "q: "}}}, {"default_prompt_name", "passage"}});
  expect_error(d, file, {"'default_prompt_name'", "passage"});
  write_json(d / file, {{"prompts", json::array({"query: "})}});
  expect_error(d, file, {"'prompts'", "object"});
  write_json(d / file, {{"prompts", {{"query", 1}}}});
  expect_error(d, file, {"'prompts'", "query", "string"});
  write_json(d / file, {{"model_type", "SparseEncoder"}});
  expect_error(d, file, {"'model_type'", "SparseEncoder"});
  write_file_atomic(d / file, "{\"prompts\": ");
  expect_error(d, file, {"invalid JSON"});
}

TEST(StFolder, PoolingNames) {
  EXPECT_EQ(parse_pooling("cls"), Pooling::kCls);
  EXPECT_EQ(parse_pooling("mean"), Pooling::kMean);
  EXPECT_EQ(parse_pooling("max"), Pooling::kMax);
  EXPECT_EQ(parse_pooling("mean_sqrt_len"), Pooling::kMeanSqrtLen);
  EXPECT_EQ(parse_pooling("last_token"), Pooling::kLastToken);
  EXPECT_EQ(parse_pooling("last-token"), Pooling::kLastToken);  // TEI's CLI spelling
  EXPECT_EQ(parse_pooling("splade"), std::nullopt);
  EXPECT_EQ(parse_pooling("CLS"), std::nullopt);
  for (Pooling p :
       {Pooling::kCls, Pooling::kMean, Pooling::kMax, Pooling::kMeanSqrtLen, Pooling::kLastToken}) {
    EXPECT_EQ(parse_pooling(pooling_name(p)), p);
  }
}

}  // namespace
}  // namespace bertfit
