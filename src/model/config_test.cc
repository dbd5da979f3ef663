// ModelConfig: parsing the golden and bert-base-uncased configs, every rejection with the file
// and key in the message, label handling, key=value overrides, and to_json -> parse round trips.
#include "model/config.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "model/family.h"
#include "tests/util/errors.h"

namespace bertfit {
namespace {

using nlohmann::json;
const std::string kShared = BERTFIT_SHARED_DIR;

using testing::error_of;

// Parses `j` as file "test_config.json" and returns the error (must name file and key).
void expect_config_error(const json& j, const std::string& key, const std::string& what) {
  std::string msg = error_of([&] { parse_model_config(j.dump(), "test_config.json"); });
  ASSERT_FALSE(msg.empty()) << "no error for " << j.dump();
  EXPECT_NE(msg.find("test_config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find(key), std::string::npos) << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << msg;
}

json golden_json(const std::string& model) {
  return json::parse(read_file(kShared + "/golden/" + model + "/model/config.json"));
}

TEST(Config, GoldenDebertaV3) {
  ModelConfig c = load_model_config(kShared + "/golden/deberta-v3-tiny/model/config.json");
  EXPECT_EQ(c.family, &model_family("deberta-v2"));
  EXPECT_TRUE(c.relative.enabled);
  EXPECT_EQ(c.relative.buckets, 256);
  EXPECT_EQ(c.relative.span(c.max_positions), 256);
  EXPECT_TRUE(c.relative.c2p && c.relative.p2c && c.relative.layer_norm);
  EXPECT_FALSE(c.absolute_positions);
  EXPECT_FALSE(c.token_types());
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-7);
  EXPECT_EQ(c.pooler_dim(), 32);
  // Written back and read again: the same config.
  EXPECT_EQ(parse_model_config(model_config_to_json(c), "again"), c);
  // DebertaV2Config's string form of pos_att_type, and one type alone.
  json j = golden_json("deberta-v3-tiny");
  j["pos_att_type"] = "p2c|c2p";
  EXPECT_EQ(parse_model_config(j.dump(), "s").relative, c.relative);
  j["pos_att_type"] = "C2P";
  const ModelConfig one = parse_model_config(j.dump(), "s");
  EXPECT_TRUE(one.relative.c2p);
  EXPECT_FALSE(one.relative.p2c);
}

TEST(Config, DebertaRefusesWhatItDoesNotRun) {
  const json d = golden_json("deberta-v3-tiny");
  auto with = [&](const char* key, const json& v) {
    json j = d;
    j[key] = v;
    return j;
  };
  expect_config_error(with("share_att_key", false), "share_att_key", "not supported");
  expect_config_error(with("pos_att_type", json::array({"p2p"})), "pos_att_type", "p2p");
  expect_config_error(with("pos_att_type", json::array()), "pos_att_type", "c2p");
  expect_config_error(with("conv_kernel_size", 3), "conv_kernel_size", "not supported");
  expect_config_error(with("embedding_size", 16), "embedding_size", "not supported");
  expect_config_error(with("relative_attention", false), "position_biased_input", "no positions");
}

TEST(Config, GoldenDistilBert) {
  ModelConfig c = load_model_config(kShared + "/golden/distilbert-tiny/model/config.json");
  EXPECT_EQ(c.family, &model_family("distilbert"));
  EXPECT_EQ(c.vocab_size, 30522);
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.layers, 2);
  EXPECT_EQ(c.heads, 2);
  EXPECT_EQ(c.head_dim(), 32);
  EXPECT_EQ(c.intermediate, 256);
  EXPECT_EQ(c.max_positions, 512);
  EXPECT_EQ(c.type_vocab_size, 0);
  EXPECT_EQ(c.activation, Activation::kGelu);
  EXPECT_EQ(c.layer_norm_eps, 1e-12);
  EXPECT_EQ(c.hidden_dropout, 0.1);
  EXPECT_EQ(c.attention_dropout, 0.1);
  EXPECT_EQ(c.classifier_dropout, 0.2);
  EXPECT_EQ(c.num_labels, 2);  // no id2label: PretrainedConfig's default of 2
  EXPECT_EQ(c.id2label, (std::vector<std::string>{"LABEL_0", "LABEL_1"}));
  EXPECT_EQ(c.problem_type, "");
  EXPECT_FALSE(c.is_regression());
  EXPECT_EQ(c.pad_token_id, 0);
  EXPECT_EQ(c.initializer_range, 0.02);
}

TEST(Config, GoldenBert) {
  ModelConfig c = load_model_config(kShared + "/golden/bert-tiny/model/config.json");
  EXPECT_EQ(c.family, &model_family("bert"));
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.layers, 3);
  EXPECT_EQ(c.heads, 4);
  EXPECT_EQ(c.intermediate, 192);
  EXPECT_EQ(c.type_vocab_size, 2);
  EXPECT_EQ(c.num_labels, 3);
  EXPECT_EQ(c.id2label[2], "LABEL_2");
  EXPECT_EQ(c.classifier_dropout, 0.1);  // null: hidden_dropout_prob
  EXPECT_EQ(c.layer_norm_eps, 1e-12);
}

TEST(Config, BertBaseUncasedAndDefaults) {
  ModelConfig c = load_model_config(kShared + "/data/configs/bert-base-uncased-config.json");
  ModelConfig d = ModelConfig::defaults(model_family("bert"));
  EXPECT_EQ(c.other_architecture, "BertForMaskedLM");  // a pre-trained encoder, no classifier
  d.other_architecture = c.other_architecture;
  EXPECT_EQ(c, d);  // bert-base-uncased is BertConfig's defaults
  EXPECT_EQ(d.layers, 12);
  EXPECT_EQ(d.hidden, 768);
  EXPECT_EQ(d.heads, 12);
  EXPECT_EQ(d.intermediate, 3072);
  EXPECT_EQ(d.type_vocab_size, 2);
  ModelConfig s = ModelConfig::defaults(model_family("distilbert"));
  EXPECT_EQ(s.layers, 6);
  EXPECT_EQ(s.hidden, 768);
  EXPECT_EQ(s.intermediate, 3072);
  EXPECT_EQ(s.hidden_dropout, 0.1);
  EXPECT_EQ(s.attention_dropout, 0.1);
  EXPECT_EQ(s.classifier_dropout, 0.2);
  EXPECT_EQ(s.type_vocab_size, 0);
  EXPECT_EQ(s.id2label.size(), 2u);
}

TEST(Config, GoogleConfigWithoutModelTypeIsAClearError) {
  std::string path = kShared + "/data/configs/bert-base-uncased-google-bert_config.json";
  std::string msg = error_of([&] { load_model_config(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("model_type"), std::string::npos) << msg;
}

TEST(Config, Rejections) {
  json d = golden_json("distilbert-tiny");
  json b = golden_json("bert-tiny");
  auto with = [](json j, const std::string& key, json value) {
    j[key] = std::move(value);
    return j;
  };
  auto without = [](json j, const std::string& key) {
    j.erase(key);
    return j;
  };
  expect_config_error(with(d, "model_type", "mpnet"), "model_type", "unsupported");
  expect_config_error(without(d, "dim"), "'dim'", "missing");
  expect_config_error(without(b, "num_hidden_layers"), "'num_hidden_layers'", "missing");
  expect_config_error(with(d, "activation", "silu"), "'activation'", "not supported");
  expect_config_error(with(b, "hidden_act", "gelu_fast"), "'hidden_act'", "not supported");
  expect_config_error(with(d, "sinusoidal_pos_embds", true), "'sinusoidal_pos_embds'", "");
  expect_config_error(with(b, "position_embedding_type", "relative_key"),
                      "'position_embedding_type'", "absolute");
  expect_config_error(with(b, "problem_type", "ranking"), "'problem_type'",
                      "multi_label_classification");
  expect_config_error(with(b, "problem_type", "regression"), "'problem_type'", "1 label");
  expect_config_error(with(d, "n_heads", 5), "'dim'", "divisible");
  expect_config_error(with(d, "n_layers", "2"), "'n_layers'", "integer");
  expect_config_error(with(d, "n_layers", 2.5), "'n_layers'", "integer");
  expect_config_error(with(d, "n_layers", 0), "'n_layers'", "at least 1");
  expect_config_error(with(d, "dropout", 1.5), "'dropout'", "probability");
  expect_config_error(with(b, "classifier_dropout", -0.1), "'classifier_dropout'", "");
  expect_config_error(with(b, "layer_norm_eps", 0), "'layer_norm_eps'", "positive");
  expect_config_error(with(d, "pad_token_id", 30522), "'pad_token_id'", "vocab_size");
  expect_config_error(with(b, "type_vocab_size", 0), "'type_vocab_size'", "");
  // ELECTRA states its embedding size: without it the projection's shape would be a guess.
  json e = golden_json("electra-tiny");
  expect_config_error(without(e, "embedding_size"), "'embedding_size'", "missing");
  expect_config_error(with(e, "embedding_size", 0), "'embedding_size'", "at least 1");
  expect_config_error(with(b, "is_decoder", true), "'is_decoder'", "");
  expect_config_error(json::array({1}), "", "JSON object");
  std::string msg = error_of([] { parse_model_config("{\"model_type\": ", "broken.json"); });
  EXPECT_NE(msg.find("broken.json"), std::string::npos) << msg;
}

TEST(Config, ActivationsAndDefaultsForMissingOptionalKeys) {
  json d = golden_json("distilbert-tiny");
  d["activation"] = "gelu_pytorch_tanh";
  d.erase("qa_dropout");
  d.erase("seq_classif_dropout");
  d.erase("initializer_range");
  ModelConfig c = parse_model_config(d.dump(), "t.json");
  EXPECT_EQ(c.activation, Activation::kGeluNew);
  EXPECT_EQ(c.classifier_dropout, 0.2);
  EXPECT_EQ(c.initializer_range, 0.02);
  json b = golden_json("bert-tiny");
  b["hidden_act"] = "relu";
  b["classifier_dropout"] = 0.3;
  c = parse_model_config(b.dump(), "t.json");
  EXPECT_EQ(c.activation, Activation::kRelu);
  EXPECT_EQ(c.classifier_dropout, 0.3);
}

TEST(Config, Labels) {
  json d = golden_json("distilbert-tiny");
  json j = d;
  j["id2label"] = {{"1", "pos"}, {"0", "neg"}};
  j["label2id"] = {{"neg", 0}, {"pos", 1}};
  ModelConfig c = parse_model_config(j.dump(), "t.json");
  EXPECT_EQ(c.id2label, (std::vector<std::string>{"neg", "pos"}));

  j = d;
  j["num_labels"] = 1;
  c = parse_model_config(j.dump(), "t.json");
  EXPECT_EQ(c.num_labels, 1);
  EXPECT_EQ(c.id2label, std::vector<std::string>{"LABEL_0"});
  EXPECT_TRUE(c.is_regression());

  j = d;
  j["label2id"] = {{"b", 1}, {"a", 0}, {"c", 2}};
  c = parse_model_config(j.dump(), "t.json");
  EXPECT_EQ(c.id2label, (std::vector<std::string>{"a", "b", "c"}));

  j = d;
  j["id2label"] = {{"0", "a"}, {"1", "b"}};
  j["num_labels"] = 3;
  expect_config_error(j, "'num_labels'", "disagrees");
  j.erase("num_labels");
  j["label2id"] = {{"a", 1}, {"b", 0}};
  expect_config_error(j, "'label2id'", "maps");
  j["label2id"] = {{"a", 0}};
  expect_config_error(j, "'label2id'", "entries");
  j.erase("label2id");
  j["id2label"] = {{"0", "a"}, {"2", "b"}};
  expect_config_error(j, "'id2label'", "\"2\"");
  j["id2label"] = {{"0", "a"}, {"x", "b"}};
  expect_config_error(j, "'id2label'", "\"x\"");
  j["id2label"] = {{"0", "a"}, {"1", 5}};
  expect_config_error(j, "'id2label'", "string");
  j = d;
  j["num_labels"] = 1;
  j["problem_type"] = "single_label_classification";
  expect_config_error(j, "'problem_type'", "at least 2");
}

// to_json -> parse gives the same config for many variants.
TEST(Config, ToJsonRoundTrip) {
  std::vector<ModelConfig> configs = {
      ModelConfig::defaults(model_family("distilbert")),
      ModelConfig::defaults(model_family("bert")),
      load_model_config(kShared + "/golden/distilbert-tiny/model/config.json"),
      load_model_config(kShared + "/golden/bert-tiny/model/config.json")};
  ModelConfig custom = ModelConfig::defaults(model_family("bert"));
  custom.activation = Activation::kGeluNew;
  custom.classifier_dropout = 0.25;
  custom.layer_norm_eps = 1e-5;
  custom.num_labels = 1;
  custom.id2label = {"score"};
  custom.problem_type = "regression";
  custom.pad_token_id = 3;
  custom.initializer_range = 0.037;
  configs.push_back(custom);
  ModelConfig relu = ModelConfig::defaults(model_family("distilbert"));
  relu.activation = Activation::kRelu;
  relu.num_labels = 3;
  relu.id2label = {"entailment", "neutral", "contradiction"};
  relu.problem_type = "single_label_classification";
  relu.hidden_dropout = 0.0;
  configs.push_back(relu);
  for (const auto& c : configs) {
    std::string text = model_config_to_json(c);
    EXPECT_EQ(parse_model_config(text, "roundtrip.json"), c) << text;
  }
  json b = json::parse(model_config_to_json(configs[3]));
  EXPECT_EQ(b["architectures"], json::array({"BertForSequenceClassification"}));
  EXPECT_TRUE(b["classifier_dropout"].is_null());
  EXPECT_EQ(b["id2label"]["1"], "LABEL_1");
  EXPECT_EQ(b["label2id"]["LABEL_2"], 2);
  EXPECT_FALSE(b.contains("problem_type"));
  json r = json::parse(model_config_to_json(custom));
  EXPECT_EQ(r["classifier_dropout"], 0.25);
  EXPECT_EQ(r["problem_type"], "regression");
  EXPECT_EQ(r["hidden_act"], "gelu_new");
  json d = json::parse(model_config_to_json(configs[0]));
  EXPECT_EQ(d["architectures"], json::array({"DistilBertForSequenceClassification"}));
  EXPECT_EQ(d["seq_classif_dropout"], 0.2);
  EXPECT_EQ(d["sinusoidal_pos_embds"], false);
  EXPECT_EQ(d["n_layers"], 6);
}

TEST(Config, ToJsonKeepsUnknownKeysOfTheOriginal) {
  json original = golden_json("distilbert-tiny");
  original["_name_or_path"] = "my-model";
  original["qa_dropout"] = 0.3;
  original["num_labels"] = 2;
  original["torch_dtype"] = "float16";
  ModelConfig c = parse_model_config_json(original, "t.json");
  c.num_labels = 3;
  c.id2label = {"a", "b", "c"};
  json out = json::parse(model_config_to_json(c, original));
  EXPECT_EQ(out["_name_or_path"], "my-model");
  EXPECT_EQ(out["qa_dropout"], 0.3);
  EXPECT_FALSE(out.contains("num_labels"));
  EXPECT_FALSE(out.contains("torch_dtype"));
  EXPECT_EQ(parse_model_config_json(out, "out.json"), c);
}

TEST(Config, Overrides) {
  json d = json::parse(model_config_to_json(ModelConfig::defaults(model_family("distilbert"))));
  apply_config_override(d, "n_layers=2");
  apply_config_override(d, "activation=gelu_new");
  apply_config_override(d, "dim=128");
  apply_config_override(d, "n_heads=4");
  apply_config_override(d, "num_labels=3");
  apply_config_override(d, "id2label={\"0\":\"a\",\"1\":\"b\",\"2\":\"c\"}");
  apply_config_override(d, "label2id={\"a\":0,\"b\":1,\"c\":2}");
  apply_config_override(d, "transformers_version=4.30.0");  // present in the JSON: allowed
  EXPECT_EQ(d["n_layers"], 2);
  EXPECT_EQ(d["activation"], "gelu_new");
  ModelConfig c = parse_model_config_json(d, "t.json");
  EXPECT_EQ(c.layers, 2);
  EXPECT_EQ(c.hidden, 128);
  EXPECT_EQ(c.activation, Activation::kGeluNew);
  EXPECT_EQ(c.id2label, (std::vector<std::string>{"a", "b", "c"}));

  json b = json::parse(model_config_to_json(ModelConfig::defaults(model_family("bert"))));
  apply_config_override(b, "classifier_dropout=0.3");
  apply_config_override(b, "num_labels=1");
  EXPECT_FALSE(b.contains("num_labels"));
  EXPECT_EQ(b["id2label"].size(), 1u);
  c = parse_model_config_json(b, "t.json");
  EXPECT_EQ(c.classifier_dropout, 0.3);
  EXPECT_TRUE(c.is_regression());
  apply_config_override(b, "classifier_dropout=null");
  EXPECT_TRUE(b["classifier_dropout"].is_null());

  std::string msg = error_of([&] { apply_config_override(b, "n_layers=2"); });
  EXPECT_NE(msg.find("'n_layers'"), std::string::npos) << msg;         // a DistilBERT key on BERT
  EXPECT_NE(msg.find("num_hidden_layers"), std::string::npos) << msg;  // lists the known keys
  EXPECT_NE(error_of([&] { apply_config_override(b, "hidden_size"); }).find("key=value"),
            std::string::npos);
  EXPECT_NE(error_of([&] { apply_config_override(b, "=3"); }).find("key=value"), std::string::npos);
  EXPECT_NE(error_of([&] { apply_config_override(b, "model_type=distilbert"); }).find("model_type"),
            std::string::npos);
  EXPECT_NE(error_of([&] { apply_config_override(b, "num_labels=two"); }).find("num_labels"),
            std::string::npos);
  EXPECT_NE(error_of([&] { apply_config_override(b, "num_labels=0"); }).find("at least 1"),
            std::string::npos);
}

}  // namespace
}  // namespace bertfit
