// The BERT family (model_type "bert", transformers' BertForSequenceClassification): token-type
// embeddings, dropout on the attention output projection, a pooler (dense + tanh on the first
// token) before the classifier.
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "model/config.h"
#include "model/config_reader.h"
#include "model/families/bert_keys.h"
#include "model/family.h"

namespace bertfit {

const ConfigKeyNames kBertKeyNames = {
    "hidden_size", "num_hidden_layers",   "num_attention_heads",         "intermediate_size",
    "hidden_act",  "hidden_dropout_prob", "attention_probs_dropout_prob"};

std::vector<std::string> bert_config_keys(std::vector<std::string> extra) {
  std::vector<std::string> keys = {"vocab_size",
                                   "hidden_size",
                                   "num_hidden_layers",
                                   "num_attention_heads",
                                   "intermediate_size",
                                   "hidden_act",
                                   "hidden_dropout_prob",
                                   "attention_probs_dropout_prob",
                                   "max_position_embeddings",
                                   "type_vocab_size",
                                   "initializer_range",
                                   "layer_norm_eps",
                                   "pad_token_id",
                                   "position_embedding_type",
                                   "use_cache",
                                   "classifier_dropout"};
  keys.insert(keys.end(), extra.begin(), extra.end());
  return keys;
}

LayerNames bert_layer_names(const char* prefix) {
  return {prefix,
          "attention.self.query",
          "attention.self.key",
          "attention.self.value",
          "attention.output.dense",
          "attention.output.LayerNorm",
          "intermediate.dense",
          "output.dense",
          "output.LayerNorm"};
}

void bert_defaults(ModelConfig& c) {
  c.layers = 12;
  c.type_vocab_size = 2;
  c.classifier_dropout = c.hidden_dropout;  // classifier_dropout null
}

void read_bert_keys(const ConfigReader& r, ModelConfig& c) {
  c.type_vocab_size = r.integer_or("type_vocab_size", c.type_vocab_size, 1);
  c.layer_norm_eps = r.non_negative_or("layer_norm_eps", c.layer_norm_eps, true);
  c.classifier_dropout = r.probability_or("classifier_dropout", c.hidden_dropout);
  const std::string pos = r.string_or("position_embedding_type", "absolute");
  if (pos != "absolute") {
    throw_error(r.source(), ": key 'position_embedding_type' value '", pos,
                "' is not supported (only \"absolute\")");
  }
  if (r.bool_or("is_decoder", false)) {
    throw_error(r.source(), ": key 'is_decoder' true (causal attention) is not supported");
  }
}

void write_bert_keys(const ModelConfig& c, nlohmann::json& j) {
  j["type_vocab_size"] = c.type_vocab_size;
  j["layer_norm_eps"] = c.layer_norm_eps;
  j["position_embedding_type"] = "absolute";
  j["classifier_dropout"] = c.classifier_dropout == c.hidden_dropout
                                ? nlohmann::json(nullptr)
                                : nlohmann::json(c.classifier_dropout);
  if (!j.contains("use_cache")) j["use_cache"] = true;
}

const ModelFamily& bert_family() {
  static const ModelFamily family{
      .model_type = "bert",
      .model_class = "BertForSequenceClassification",
      .tokenizer_class = "BertTokenizer",
      .tokenizer = TokenizerKind::kWordPiece,
      .base_prefix = "bert.",
      .keys = kBertKeyNames,
      .config_keys = bert_config_keys(),
      .embeddings = {"bert.embeddings.", "word_embeddings", "position_embeddings",
                     "token_type_embeddings", "LayerNorm", nullptr},
      .layer = bert_layer_names("bert.encoder.layer."),
      .relative = {nullptr, nullptr},
      .head = {"bert.pooler.dense", "classifier", ActKind::kTanh,
               /*dropout_before_dense=*/false},
      .token_head = {"classifier", /*hidden_dropout=*/false},
      .attention_output_dropout = true,
      .masks_padding_rows = false,
      .position_ids = PositionIds::kIndex,
      .defaults = bert_defaults,
      .read_keys = read_bert_keys,
      .write_keys = write_bert_keys,
  };
  return family;
}

}  // namespace bertfit
