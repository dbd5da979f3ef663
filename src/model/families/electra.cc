// The ELECTRA family (model_type "electra", transformers' ElectraForSequenceClassification on an
// "electra." base model): BERT's encoder and config keys (ElectraConfig's are BertConfig's plus
// embedding_size and the summary_* keys); embeddings of embedding_size, projected to the hidden
// size by electra.embeddings_project when the two differ; no pooler: the head drops the first
// token's state, then classifier.dense, GELU (always, whatever hidden_act says), dropout,
// classifier.out_proj. WordPiece tokenizer (ElectraTokenizer is BertTokenizer's).
#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/config_reader.h"
#include "model/families/bert_keys.h"
#include "model/family.h"

namespace bertfit {
namespace {

// ElectraConfig's defaults (google/electra-small-discriminator's sizes).
void electra_defaults(ModelConfig& c) {
  bert_defaults(c);
  c.hidden = 256;
  c.heads = 4;
  c.intermediate = 1024;
  c.embedding = 128;
}

void read_electra_keys(const ConfigReader& r, ModelConfig& c) {
  read_bert_keys(r, c);
  // ElectraConfig defaults it to 128, but every ELECTRA checkpoint states it, and a wrong guess
  // would only surface as a shape mismatch: required.
  c.embedding = r.integer("embedding_size", 1);
}

void write_electra_keys(const ModelConfig& c, nlohmann::json& j) {
  write_bert_keys(c, j);
  j["embedding_size"] = c.embedding_dim();
  // The summary keys ElectraConfig writes (transformers' sequence-summary helpers, unused by
  // ElectraForSequenceClassification): kept when the source config has them.
  if (!j.contains("summary_type")) j["summary_type"] = "first";
  if (!j.contains("summary_use_proj")) j["summary_use_proj"] = true;
  if (!j.contains("summary_activation")) j["summary_activation"] = "gelu";
  if (!j.contains("summary_last_dropout")) j["summary_last_dropout"] = 0.1;
}

}  // namespace

const ModelFamily& electra_family() {
  static const ModelFamily family{
      .model_type = "electra",
      .model_class = "ElectraForSequenceClassification",
      .tokenizer_class = "ElectraTokenizer",
      .tokenizer = TokenizerKind::kWordPiece,
      .base_prefix = "electra.",
      .keys = kBertKeyNames,
      .config_keys = bert_config_keys({"embedding_size", "summary_type", "summary_use_proj",
                                       "summary_activation", "summary_last_dropout"}),
      .embeddings = {"electra.embeddings.", "word_embeddings", "position_embeddings",
                     "token_type_embeddings", "LayerNorm", "electra.embeddings_project"},
      .layer = bert_layer_names("electra.encoder.layer."),
      .relative = {nullptr, nullptr},
      .head = {"classifier.dense", "classifier.out_proj", ActKind::kGelu,
               /*dropout_before_dense=*/true},
      .token_head = {"classifier", /*hidden_dropout=*/false},
      .attention_output_dropout = true,
      .masks_padding_rows = false,
      .position_ids = PositionIds::kIndex,
      .defaults = electra_defaults,
      .read_keys = read_electra_keys,
      .write_keys = write_electra_keys,
  };
  return family;
}

}  // namespace bertfit
