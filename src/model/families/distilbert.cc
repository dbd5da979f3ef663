// The DistilBERT family (model_type "distilbert", transformers'
// DistilBertForSequenceClassification): no token types, no dropout on the attention output
// projection, a pre_classifier (dense + ReLU on the first token) before the classifier.
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "model/config.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace bertfit {
namespace {

void distilbert_defaults(ModelConfig& c) {
  c.layers = 6;
  c.type_vocab_size = 0;
  c.classifier_dropout = 0.2;  // seq_classif_dropout
}

void read_distilbert_keys(const ConfigReader& r, ModelConfig& c) {
  c.classifier_dropout = r.probability_or("seq_classif_dropout", c.classifier_dropout);
  if (r.bool_or("sinusoidal_pos_embds", false)) {
    throw_error(r.source(), ": key 'sinusoidal_pos_embds' true is not supported (bertfit uses ",
                "learned position embeddings)");
  }
}

void write_distilbert_keys(const ModelConfig& c, nlohmann::json& j) {
  j["seq_classif_dropout"] = c.classifier_dropout;
  j["sinusoidal_pos_embds"] = false;
  if (!j.contains("qa_dropout")) j["qa_dropout"] = 0.1;
  if (!j.contains("tie_weights_")) j["tie_weights_"] = true;
}

}  // namespace

const ModelFamily& distilbert_family() {
  static const ModelFamily family{
      .model_type = "distilbert",
      .model_class = "DistilBertForSequenceClassification",
      .tokenizer_class = "DistilBertTokenizer",
      .tokenizer = TokenizerKind::kWordPiece,
      .base_prefix = "distilbert.",
      .keys = {"dim", "n_layers", "n_heads", "hidden_dim", "activation", "dropout",
               "attention_dropout"},
      .config_keys = {"vocab_size", "max_position_embeddings", "sinusoidal_pos_embds", "n_layers",
                      "n_heads", "dim", "hidden_dim", "dropout", "attention_dropout", "activation",
                      "initializer_range", "qa_dropout", "seq_classif_dropout", "pad_token_id",
                      "tie_weights_"},
      .embeddings = {"distilbert.embeddings.", "word_embeddings", "position_embeddings",
                     /*token_type=*/nullptr, "LayerNorm", nullptr},
      .layer = {"distilbert.transformer.layer.", "attention.q_lin", "attention.k_lin",
                "attention.v_lin", "attention.out_lin", "sa_layer_norm", "ffn.lin1", "ffn.lin2",
                "output_layer_norm"},
      .relative = {nullptr, nullptr},
      .head = {"pre_classifier", "classifier", ActKind::kRelu, /*dropout_before_dense=*/false},
      .token_head = {"classifier", /*hidden_dropout=*/true},
      .attention_output_dropout = false,
      .masks_padding_rows = false,
      .position_ids = PositionIds::kIndex,
      .defaults = distilbert_defaults,
      .read_keys = read_distilbert_keys,
      .write_keys = write_distilbert_keys,
  };
  return family;
}

}  // namespace bertfit
