// The ModernBERT family (model_type "modernbert", transformers' ModernBertForSequenceClassification
// on a "model." base model): pre-LayerNorm layers (layer 0 without an attention norm) and a final
// norm; no bias in any product or norm unless the config asks (attention_bias, mlp_bias,
// norm_bias, classifier_bias); one fused Wqkv; a gated FFN (Wi gives 2·I, GELU(input) · gate,
// then Wo); rotary positions with a global and a local base, every global_attn_every_n_layers-th
// layer global and the others attending within local_attention / 2 positions; no absolute
// positions and no token types; the head dense → classifier_activation → norm on the first token
// or the mean of the real tokens (classifier_pooling), then the classifier. Byte-level BPE
// tokenizer.json with a [CLS] A [SEP] (B [SEP]) template. Defaults (ModernBertConfig's, which
// are answerdotai/ModernBERT-base's) for keys a config leaves out and for `init`.
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "model/config.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace bertfit {
namespace {

// ModernBertConfig's defaults (= answerdotai/ModernBERT-base).
void modernbert_defaults(ModelConfig& c) {
  c.vocab_size = 50368;
  c.hidden = 768;
  c.layers = 22;
  c.heads = 12;
  c.intermediate = 1152;
  c.max_positions = 8192;
  c.type_vocab_size = 0;
  c.layer_norm_eps = 1e-5;
  c.pad_token_id = 50283;
  c.hidden_dropout = 0.0;     // mlp_dropout
  c.attention_dropout = 0.0;  // attention_dropout
  c.classifier_dropout = 0.0;
  c.embedding_dropout = 0.0;
  c.attention_output_dropout = 0.0;
  c.absolute_positions = false;
  c.structure = {.pre_norm = true,
                 .first_attention_norm = false,
                 .gated_ffn = true,
                 .attention_bias = false,
                 .mlp_bias = false,
                 .norm_bias = false};
  c.rotary = {.enabled = true,
              .global_theta = 160000.0,
              .local_theta = 10000.0,
              .global_every = 3,
              .window = 128};
  c.classifier_pooling = Pooling::kCls;
  c.classifier_bias = false;
  c.pooler_activation = Activation::kGelu;
  c.init_scheme = InitScheme::kModernBert;
  c.initializer_cutoff = 2.0;
}

void read_modernbert_keys(const ConfigReader& r, ModelConfig& c) {
  c.layer_norm_eps = r.non_negative_or("norm_eps", 1e-5, true);
  c.initializer_cutoff = r.non_negative_or("initializer_cutoff_factor", 2.0, true);
  c.structure.norm_bias = r.bool_or("norm_bias", false);
  c.structure.attention_bias = r.bool_or("attention_bias", false);
  c.structure.mlp_bias = r.bool_or("mlp_bias", false);
  c.rotary.global_theta = r.non_negative_or("global_rope_theta", 160000.0, true);
  c.rotary.local_theta = r.non_negative_or("local_rope_theta", 10000.0, true);
  c.rotary.global_every = r.integer_or("global_attn_every_n_layers", 3, 1);
  c.rotary.window = r.integer_or("local_attention", 128, 0);
  c.embedding_dropout = r.probability_or("embedding_dropout", 0.0);
  c.attention_output_dropout = c.attention_dropout;  // ModernBertAttention's out_drop
  c.classifier_dropout = r.probability_or("classifier_dropout", 0.0);
  c.classifier_bias = r.bool_or("classifier_bias", false);
  c.pooler_activation = r.activation_or("classifier_activation", Activation::kGelu);
  const std::string pooling = r.string_or("classifier_pooling", "cls");
  if (pooling == "cls") {
    c.classifier_pooling = Pooling::kCls;
  } else if (pooling == "mean") {
    c.classifier_pooling = Pooling::kMean;
  } else {
    throw_error(r.source(), ": key 'classifier_pooling' value '", pooling,
                "' is not supported (cls, mean)");
  }
  if (c.head_dim() % 2 != 0) {
    throw_error(r.source(), ": hidden_size / num_attention_heads (", c.head_dim(),
                ") must be even for rotary positions");
  }
}

void write_modernbert_keys(const ModelConfig& c, nlohmann::json& j) {
  j["norm_eps"] = c.layer_norm_eps;
  j["initializer_cutoff_factor"] = c.initializer_cutoff;
  j["norm_bias"] = c.structure.norm_bias;
  j["attention_bias"] = c.structure.attention_bias;
  j["mlp_bias"] = c.structure.mlp_bias;
  j["global_rope_theta"] = c.rotary.global_theta;
  j["local_rope_theta"] = c.rotary.local_theta;
  j["global_attn_every_n_layers"] = c.rotary.global_every;
  j["local_attention"] = c.rotary.window;
  j["embedding_dropout"] = c.embedding_dropout;
  j["classifier_dropout"] = c.classifier_dropout;
  j["classifier_bias"] = c.classifier_bias;
  j["classifier_activation"] = activation_name(c.pooler_activation.value_or(Activation::kGelu));
  j["classifier_pooling"] = c.classifier_pooling == Pooling::kMean ? "mean" : "cls";
}

}  // namespace

const ModelFamily& modernbert_family() {
  static const ModelFamily family{
      .model_type = "modernbert",
      .model_class = "ModernBertForSequenceClassification",
      .tokenizer_class = "PreTrainedTokenizerFast",
      .tokenizer = TokenizerKind::kFastByteLevelBpe,
      .base_prefix = "model.",
      .keys = {"hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
               "hidden_activation", "mlp_dropout", "attention_dropout"},
      .config_keys = {"vocab_size",
                      "hidden_size",
                      "intermediate_size",
                      "num_hidden_layers",
                      "num_attention_heads",
                      "hidden_activation",
                      "max_position_embeddings",
                      "initializer_range",
                      "initializer_cutoff_factor",
                      "norm_eps",
                      "norm_bias",
                      "pad_token_id",
                      "eos_token_id",
                      "bos_token_id",
                      "cls_token_id",
                      "sep_token_id",
                      "global_rope_theta",
                      "attention_bias",
                      "attention_dropout",
                      "global_attn_every_n_layers",
                      "local_attention",
                      "local_rope_theta",
                      "embedding_dropout",
                      "mlp_bias",
                      "mlp_dropout",
                      "decoder_bias",
                      "classifier_pooling",
                      "classifier_dropout",
                      "classifier_bias",
                      "classifier_activation",
                      "deterministic_flash_attn",
                      "sparse_prediction",
                      "sparse_pred_ignore_index",
                      "reference_compile"},
      .embeddings = {"model.embeddings.", "tok_embeddings", nullptr, nullptr, "norm", nullptr},
      .layer = {"model.layers.", "attn.Wqkv", nullptr, nullptr, "attn.Wo", "attn_norm", "mlp.Wi",
                "mlp.Wo", "mlp_norm"},
      .relative = {nullptr, nullptr},
      .head = {"head.dense", "classifier", ActKind::kGelu, /*dropout_before_dense=*/false,
               "head.norm"},
      .token_head = {"classifier", /*hidden_dropout=*/false, /*dense_and_norm=*/true},
      .attention_output_dropout = true,
      .masks_padding_rows = false,
      .position_ids = PositionIds::kIndex,
      .final_norm = "model.final_norm",
      .defaults = modernbert_defaults,
      .read_keys = read_modernbert_keys,
      .write_keys = write_modernbert_keys,
  };
  return family;
}

}  // namespace bertfit
