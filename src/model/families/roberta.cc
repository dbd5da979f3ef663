// The RoBERTa family: model_types roberta, xlm-roberta and camembert (transformers'
// RobertaForSequenceClassification, XLMRobertaForSequenceClassification,
// CamembertForSequenceClassification, all on a "roberta." base model). BERT's encoder and
// config keys (RobertaConfig extends BertConfig: pad_token_id 1, bos 0, eos 2); position ids
// count from the padding id; no pooler: the head (classifier.dense, classifier.out_proj) drops
// the first token's state, then dense, tanh, dropout, out_proj. The three differ only in their
// names and tokenizers (byte-level BPE; SentencePiece with fairseq's ids).
#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/families/bert_keys.h"
#include "model/family.h"

namespace bertfit {
namespace {

void roberta_defaults(ModelConfig& c) {
  bert_defaults(c);
  c.pad_token_id = 1;
}

void write_roberta_keys(const ModelConfig& c, nlohmann::json& j) {
  write_bert_keys(c, j);
  if (!j.contains("bos_token_id")) j["bos_token_id"] = 0;
  if (!j.contains("eos_token_id")) j["eos_token_id"] = 2;
}

// One of the three: the same architecture under its own names.
ModelFamily roberta_like(const char* model_type, const char* model_class,
                         const char* tokenizer_class, TokenizerKind tokenizer) {
  return {
      .model_type = model_type,
      .model_class = model_class,
      .tokenizer_class = tokenizer_class,
      .tokenizer = tokenizer,
      .base_prefix = "roberta.",
      .keys = kBertKeyNames,
      .config_keys = bert_config_keys({"bos_token_id", "eos_token_id"}),
      .embeddings = {"roberta.embeddings.", "word_embeddings", "position_embeddings",
                     "token_type_embeddings", "LayerNorm", nullptr},
      .layer = bert_layer_names("roberta.encoder.layer."),
      .relative = {nullptr, nullptr},
      .head = {"classifier.dense", "classifier.out_proj", ActKind::kTanh,
               /*dropout_before_dense=*/true},
      .token_head = {"classifier", /*hidden_dropout=*/false},
      .attention_output_dropout = true,
      .masks_padding_rows = false,
      .position_ids = PositionIds::kAfterPadding,
      .defaults = roberta_defaults,
      .read_keys = read_bert_keys,
      .write_keys = write_roberta_keys,
  };
}

}  // namespace

const ModelFamily& roberta_family() {
  static const ModelFamily family = roberta_like("roberta", "RobertaForSequenceClassification",
                                                 "RobertaTokenizer", TokenizerKind::kByteLevelBpe);
  return family;
}

const ModelFamily& xlm_roberta_family() {
  static const ModelFamily family =
      roberta_like("xlm-roberta", "XLMRobertaForSequenceClassification", "XLMRobertaTokenizer",
                   TokenizerKind::kSentencePiece);
  return family;
}

const ModelFamily& camembert_family() {
  static const ModelFamily family =
      roberta_like("camembert", "CamembertForSequenceClassification", "CamembertTokenizer",
                   TokenizerKind::kSentencePiece);
  return family;
}

}  // namespace bertfit
