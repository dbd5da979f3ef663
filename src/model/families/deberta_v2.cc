// The DeBERTa-v2/v3 family (model_type "deberta-v2", transformers'
// DebertaV2ForSequenceClassification on a "deberta." base model): BERT's post-LayerNorm layer under
// its own names, with DeBERTa's disentangled attention (relative positions shared by every layer,
// model/relative_positions.h); no absolute positions and no token types when the config says so
// (DeBERTa-v3: position_biased_input false, type_vocab_size 0); LayerNorm eps from the config
// (1e-7); the ContextPooler (dropout, dense of pooler_hidden_size, pooler_hidden_act on the first
// token) before a dropout and the classifier. SentencePiece tokenizer (spm.model,
// DebertaV2Tokenizer). Defaults for `init` are microsoft/deberta-v3-base's.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "model/config.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace bertfit {
namespace {

const std::vector<std::string> kPositionTypes = {"c2p", "p2c"};

// microsoft/deberta-v3-base.
void deberta_defaults(ModelConfig& c) {
  c.vocab_size = 128100;
  c.layers = 12;
  c.type_vocab_size = 0;
  c.layer_norm_eps = 1e-7;
  c.classifier_dropout = c.hidden_dropout;  // cls_dropout null
  c.absolute_positions = false;
  c.relative = {.enabled = true,
                .buckets = 256,
                .max_relative = -1,
                .c2p = true,
                .p2c = true,
                .layer_norm = true};
  c.pooler_activation = Activation::kGelu;
  c.pooler_dropout = 0.0;
}

// pos_att_type: a list, or DebertaV2Config's string form "p2c|c2p".
void read_position_types(const ConfigReader& r, const nlohmann::json& j, ModelConfig& c) {
  std::vector<std::string> types;
  if (j.is_string()) {
    std::string s = j.get<std::string>();
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char ch) { return std::tolower(ch); });
    for (std::size_t at = 0; at <= s.size();) {
      std::size_t bar = s.find('|', at);
      if (bar == std::string::npos) bar = s.size();
      std::string t = s.substr(at, bar - at);
      t.erase(0, t.find_first_not_of(' '));
      t.erase(t.find_last_not_of(' ') + 1);
      if (!t.empty()) types.push_back(t);
      at = bar + 1;
    }
  } else if (j.is_array()) {
    for (const auto& t : j) {
      if (!t.is_string()) throw_error(r.source(), ": key 'pos_att_type' must list strings");
      types.push_back(t.get<std::string>());
    }
  } else if (!j.is_null()) {
    throw_error(r.source(), ": key 'pos_att_type' must be a list or a \"p2c|c2p\" string");
  }
  c.relative.c2p = c.relative.p2c = false;
  for (const auto& t : types) {
    if (t == "c2p") {
      c.relative.c2p = true;
    } else if (t == "p2c") {
      c.relative.p2c = true;
    } else {
      throw_error(r.source(), ": key 'pos_att_type' value '", t,
                  "' is not supported (c2p, p2c; DeBERTa-v1's p2p is not)");
    }
  }
}

// DebertaV2Config's defaults for keys a config leaves out (not deberta-v3-base's).
void read_deberta_keys(const ConfigReader& r, ModelConfig& c) {
  const nlohmann::json& j = r.json();
  c.type_vocab_size = r.integer_or("type_vocab_size", 0, 0);
  c.layer_norm_eps = r.non_negative_or("layer_norm_eps", 1e-7, true);
  c.classifier_dropout = r.probability_or("cls_dropout", c.hidden_dropout);
  c.absolute_positions = r.bool_or("position_biased_input", true);
  c.relative = {};
  c.relative.enabled = r.bool_or("relative_attention", false);
  c.relative.max_relative =
      r.has("max_relative_positions") ? r.integer("max_relative_positions", -1) : -1;
  c.relative.buckets = r.has("position_buckets") ? r.integer("position_buckets", -1) : -1;
  if (r.has("pos_att_type")) read_position_types(r, j["pos_att_type"], c);
  const std::string norm = r.string_or("norm_rel_ebd", "none");
  c.relative.layer_norm = norm.find("layer_norm") != std::string::npos;
  if (c.relative.enabled && !r.bool_or("share_att_key", false)) {
    throw_error(r.source(),
                ": key 'share_att_key' false (separate position projections, "
                "DeBERTa-v2-xlarge style) is not supported; DeBERTa-v3 sets it true");
  }
  if (c.relative.enabled && !c.relative.c2p && !c.relative.p2c) {
    throw_error(r.source(), ": relative_attention true needs 'pos_att_type' (c2p and/or p2c)");
  }
  if (!c.relative.enabled && (c.relative.c2p || c.relative.p2c)) {
    c.relative.c2p = c.relative.p2c = false;  // transformers ignores them without it
  }
  if (r.has("embedding_size") && r.integer("embedding_size", 1) != c.hidden) {
    throw_error(r.source(), ": key 'embedding_size' (", r.integer("embedding_size", 1),
                ") differs from hidden_size (", c.hidden,
                "): DeBERTa's embed_proj is not supported");
  }
  if (r.has("conv_kernel_size") && r.integer("conv_kernel_size", 0) > 0) {
    throw_error(r.source(),
                ": key 'conv_kernel_size' > 0 (DeBERTa-v2's ConvLayer) is not supported");
  }
  if (r.has("attention_head_size") && r.integer("attention_head_size", 1) != c.head_dim()) {
    throw_error(r.source(),
                ": key 'attention_head_size' other than hidden_size / "
                "num_attention_heads is not supported");
  }
  if (!c.absolute_positions && !c.relative.enabled) {
    throw_error(r.source(),
                ": position_biased_input false needs relative_attention true (the "
                "model would have no positions)");
  }
  c.pooler_hidden = r.integer_or("pooler_hidden_size", 0, 1);  // absent: hidden_size
  c.pooler_activation = r.activation_or("pooler_hidden_act", Activation::kGelu);
  c.pooler_dropout = r.probability_or("pooler_dropout", 0.0);
}

void write_deberta_keys(const ModelConfig& c, nlohmann::json& j) {
  j["type_vocab_size"] = c.type_vocab_size;
  j["layer_norm_eps"] = c.layer_norm_eps;
  j["position_biased_input"] = c.absolute_positions;
  j["relative_attention"] = c.relative.enabled;
  j["max_relative_positions"] = c.relative.max_relative;
  j["position_buckets"] = c.relative.buckets;
  nlohmann::json types = nlohmann::json::array();
  // transformers' own order in DeBERTa-v3 configs: p2c, c2p.
  if (c.relative.p2c) types.push_back("p2c");
  if (c.relative.c2p) types.push_back("c2p");
  j["pos_att_type"] = types;
  j["share_att_key"] = true;
  j["norm_rel_ebd"] = c.relative.layer_norm ? "layer_norm" : "none";
  if (c.pooler_hidden > 0) j["pooler_hidden_size"] = c.pooler_hidden;
  j["pooler_hidden_act"] = activation_name(c.pooler_activation.value_or(Activation::kGelu));
  j["pooler_dropout"] = std::max(0.0, c.pooler_dropout);
  if (c.classifier_dropout != c.hidden_dropout) j["cls_dropout"] = c.classifier_dropout;
}

}  // namespace

const ModelFamily& deberta_v2_family() {
  static const ModelFamily family{
      .model_type = "deberta-v2",
      .model_class = "DebertaV2ForSequenceClassification",
      .tokenizer_class = "DebertaV2Tokenizer",
      .tokenizer = TokenizerKind::kDebertaSentencePiece,
      .base_prefix = "deberta.",
      .keys = {"hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
               "hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob"},
      .config_keys = {"vocab_size",
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
                      "relative_attention",
                      "max_relative_positions",
                      "pad_token_id",
                      "position_biased_input",
                      "pos_att_type",
                      "pooler_dropout",
                      "pooler_hidden_act",
                      "pooler_hidden_size",
                      "position_buckets",
                      "share_att_key",
                      "norm_rel_ebd",
                      "cls_dropout",
                      "embedding_size"},
      .embeddings = {"deberta.embeddings.", "word_embeddings", "position_embeddings",
                     "token_type_embeddings", "LayerNorm", nullptr},
      .layer = {"deberta.encoder.layer.", "attention.self.query_proj", "attention.self.key_proj",
                "attention.self.value_proj", "attention.output.dense", "attention.output.LayerNorm",
                "intermediate.dense", "output.dense", "output.LayerNorm"},
      .relative = {"deberta.encoder.rel_embeddings", "deberta.encoder.LayerNorm"},
      .head = {"pooler.dense", "classifier", ActKind::kGelu, /*dropout_before_dense=*/true},
      .token_head = {"classifier", /*hidden_dropout=*/true},
      .attention_output_dropout = true,
      .masks_padding_rows = true,
      .position_ids = PositionIds::kIndex,
      .defaults = deberta_defaults,
      .read_keys = read_deberta_keys,
      .write_keys = write_deberta_keys,
  };
  return family;
}

}  // namespace bertfit
