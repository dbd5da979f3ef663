// ModelConfig: the arithmetic-relevant fields of a Hugging Face config.json for the sequence
// classifiers of every supported family (model/family.h), parsed with clear errors, and written
// back so that transformers' from_pretrained accepts it. Field names below are family-neutral;
// the comments give the HF keys (distilbert / bert; each family declares its own).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/head_kind.h"
#include "model/pooling.h"

namespace bertfit {

struct ModelFamily;

enum class Activation { kGelu, kGeluNew, kRelu };
// What the head's outputs mean, as transformers decides it (problem_type, else num_labels):
// regression (one output, MSE), single-label (softmax, cross-entropy), multi-label (a sigmoid
// per label, binary cross-entropy against multi-hot rows).
enum class ProblemType { kRegression, kSingleLabel, kMultiLabel };

const char* activation_name(Activation a);  // "gelu" / "gelu_new" / "relu"

// DeBERTa's relative attention (transformers' DebertaV2Config keys; model/relative_positions.h):
// scores against relative-position embeddings shared by every layer, distance i - j bucketed.
struct RelativeAttentionConfig {
  bool enabled = false;     // relative_attention
  int buckets = -1;         // position_buckets (<= 0: distances not bucketed)
  int max_relative = -1;    // max_relative_positions (< 1: max_position_embeddings)
  bool c2p = false;         // pos_att_type has "c2p" (content to position)
  bool p2c = false;         // pos_att_type has "p2c" (position to content)
  bool layer_norm = false;  // norm_rel_ebd has "layer_norm": the embeddings normalized first
  // att_span: relative embeddings have 2·span rows; distances are clamped to [-span, span).
  int span(int max_positions) const {
    if (buckets > 0) return buckets;
    return max_relative < 1 ? max_positions : max_relative;
  }
  // The largest distance the buckets are spread over (max_relative_positions, resolved).
  int max_distance(int max_positions) const {
    return max_relative < 1 ? max_positions : max_relative;
  }
  bool operator==(const RelativeAttentionConfig&) const = default;
};

// The encoder layer's structure where it differs from BERT's post-LayerNorm layer with a bias
// in every product and norm and a plain FFN (model/layer.h); ModernBERT's keys.
struct LayerStructure {
  // Norms before attention and before the FFN (pre-LN), and one after the last layer (the
  // family's final_norm); layer 0 has no attention norm when first_attention_norm is false.
  bool pre_norm = false;
  bool first_attention_norm = true;
  // The FFN's first product gives 2·I: act(its first half) · its second half (GeGLU).
  bool gated_ffn = false;
  bool attention_bias = true;  // attention_bias: in q|k|v and o
  bool mlp_bias = true;        // mlp_bias: in the FFN's two products
  bool norm_bias = true;       // norm_bias: in every LayerNorm
  bool operator==(const LayerStructure&) const = default;
};

// Rotary position embeddings on q and k and sliding-window attention (ModernBERT's keys): layer
// l is global when l % global_every == 0 (global_rope_theta), else local (local_rope_theta),
// a local layer's query i seeing key j only when |i - j| <= window / 2.
struct RotaryConfig {
  bool enabled = false;
  double global_theta = 10000.0;  // global_rope_theta
  double local_theta = 10000.0;   // local_rope_theta
  int global_every = 1;           // global_attn_every_n_layers
  int window = -1;                // local_attention (-1: every layer global)
  bool global(int l) const { return window < 0 || l % global_every == 0; }
  double theta(int l) const { return global(l) ? global_theta : local_theta; }
  // The farthest key a query of layer l sees (-1: any).
  int window_half(int l) const { return global(l) ? -1 : window / 2; }
  bool operator==(const RotaryConfig&) const = default;
};

// How `init` and a new head draw their weights: BERT's _init_weights (normals of
// initializer_range, padding rows zeroed) or ModernBERT's (normals truncated at ±cutoff·std; the
// output projections, attention's and the FFN's Wo and the head's dense, at std/√(2·layers); the
// classifier at hidden^-½; the padding row drawn like the others).
enum class InitScheme { kBert, kModernBert };

// The family a default-constructed config belongs to (DistilBERT).
const ModelFamily& default_family();

struct ModelConfig {
  const ModelFamily* family = &default_family();  // never null
  int vocab_size = 30522;                         // vocab_size
  int hidden = 768;                               // dim / hidden_size                      (C)
  int layers = 6;                                 // n_layers / num_hidden_layers           (L)
  int heads = 12;                                 // n_heads / num_attention_heads          (H)
  int intermediate = 3072;                        // hidden_dim / intermediate_size         (I)
  int embedding = 0;        // embedding_size (ELECTRA); 0: the hidden size            (E)
  int max_positions = 512;  // max_position_embeddings
  int type_vocab_size = 0;  // - / type_vocab_size (0: no token-type embeddings)
  Activation activation = Activation::kGelu;  // activation / hidden_act
  double layer_norm_eps = 1e-12;              // fixed 1e-12 / layer_norm_eps
  double hidden_dropout = 0.1;                // dropout / hidden_dropout_prob
  double attention_dropout = 0.1;             // attention_dropout / attention_probs_dropout_prob
  double classifier_dropout = 0.2;            // seq_classif_dropout / classifier_dropout ?? hidden
  int num_labels = 2;                         // len(id2label) or num_labels
  std::vector<std::string> id2label;          // size num_labels; default LABEL_i
  std::string problem_type;                   // "", "regression", "single_label_classification",
                                              // "multi_label_classification"
  int pad_token_id = 0;
  double initializer_range = 0.02;
  InitScheme init_scheme = InitScheme::kBert;
  double initializer_cutoff = 2.0;  // initializer_cutoff_factor (kModernBert)
  // Learned absolute position embeddings added at the embeddings (DeBERTa's
  // position_biased_input; false in DeBERTa-v3, whose positions are relative only).
  bool absolute_positions = true;
  RelativeAttentionConfig relative;  // off but in DeBERTa
  LayerStructure structure;          // BERT's but in ModernBERT
  RotaryConfig rotary;               // off but in ModernBERT
  // Dropout of the embeddings' output (ModernBERT's embedding_dropout; < 0: hidden_dropout) and
  // on the attention output projection (ModernBERT's attention_dropout; < 0: the family's rule,
  // hidden_dropout or none).
  double embedding_dropout = -1;
  double attention_output_dropout = -1;
  // The sequence classifier's input: the first token, or the mean of the real tokens
  // (ModernBERT's classifier_pooling); its dense layer's bias (classifier_bias).
  Pooling classifier_pooling = Pooling::kCls;
  bool classifier_bias = true;
  // The sequence classifier's dense layer when the config sizes and activates it (DeBERTa's
  // ContextPooler: pooler_hidden_size, pooler_hidden_act, pooler_dropout on the first token);
  // otherwise the family's (model/family.h, ClassifierHeadSpec) on `hidden` channels.
  int pooler_hidden = 0;                        // 0: hidden
  std::optional<Activation> pooler_activation;  // none: the family's
  double pooler_dropout = -1;                   // < 0: classifier_dropout
  // The model's head (model/head.h): token classification when config.json's architectures
  // names the family's *ForTokenClassification, else sequence classification. Saved configs name
  // its class (ModelFamily::class_for).
  HeadKind head = HeadKind::kSequenceClassification;
  // config.json's architectures[0] when it names a class of the family other than the one of
  // `head` ("BertModel", "BertForQuestionAnswering", or the other head: model/architecture.h),
  // whose head weights are then not this head's; "" when absent or `head`'s class.
  // Not written back.
  std::string other_architecture;
  // An embedding head's pooling modes (concatenated in this order) and whether the pooled
  // vector is L2-normalized (sentence-transformers' Normalize module); read from the folder's
  // sentence-transformers files, not from config.json.
  std::vector<Pooling> pooling;
  // The Dense modules between the pooling and Normalize, in order (each one's in_features is the
  // width before it); their tensors are the embedding head's.
  std::vector<DenseLayer> dense;
  bool normalize = false;

  int head_dim() const { return hidden / heads; }
  // The width of the FFN's first product: 2·I when gated.
  int ffn_inner() const { return structure.gated_ffn ? 2 * intermediate : intermediate; }
  int pooler_dim() const { return pooler_hidden > 0 ? pooler_hidden : hidden; }
  // Token-type embeddings: the family names them and the config has types (type_vocab_size).
  bool token_types() const;
  int embedding_dim() const { return embedding > 0 ? embedding : hidden; }
  // The longest sequence the position embeddings hold: max_positions, less the rows before the
  // first real position in families that count positions after the padding id (RoBERTa: 514
  // rows hold 512 tokens).
  int max_tokens() const;
  // A token classifier's is always single-label: transformers' *ForTokenClassification takes
  // cross-entropy whatever problem_type says (a multi-label or regression loss would read labels
  // it does not have).
  ProblemType problem() const {
    if (head == HeadKind::kTokenClassification) return ProblemType::kSingleLabel;
    if (problem_type == "multi_label_classification") return ProblemType::kMultiLabel;
    if (problem_type == "regression" || (problem_type.empty() && num_labels == 1))
      return ProblemType::kRegression;
    return ProblemType::kSingleLabel;
  }
  bool is_regression() const { return problem() == ProblemType::kRegression; }

  // The family's HF defaults at its base size (distilbert-base-uncased, bert-base-uncased).
  static ModelConfig defaults(const ModelFamily& family);
  const char* model_type() const;  // the family's

  bool operator==(const ModelConfig&) const = default;
};

// Parses config.json text. `source` names the file in error messages. Throws Error for an
// unknown model_type (naming the supported ones), a missing or ill-typed field, or an unsupported
// value (e.g. activation "silu", sinusoidal_pos_embds true, position_embedding_type other than
// "absolute", an unknown problem_type, regression with more than one label, hidden not divisible by
// heads). Required keys: model_type, vocab_size and the four sizes (dim/hidden_size, n_layers/
// num_hidden_layers, n_heads/num_attention_heads, hidden_dim/intermediate_size); every other
// key falls back to the HF default. Labels: id2label (keys "0".."K-1"), else num_labels, else
// 2; label2id and num_labels, when present, must agree with it.
ModelConfig parse_model_config(const std::string& json_text, const std::string& source);
ModelConfig parse_model_config_json(const nlohmann::json& hf_json, const std::string& source);
ModelConfig load_model_config(const std::string& path);

// Applies "key=value" overrides using HF key names (value parsed as JSON when it parses,
// else as a string), e.g. "n_layers=2", "hidden_act=gelu_new". Throws Error naming the key.
// Accepted keys: those of the model_type's HF config class (its family's config_keys), the label
// keys (num_labels, id2label, label2id, problem_type) and any key already in hf_json; model_type
// itself is not. "num_labels=K" is applied as set_num_labels.
void apply_config_override(nlohmann::json& hf_json, const std::string& key_value);

// Replaces id2label / label2id with K generic labels LABEL_0 .. LABEL_{K-1} (and drops a
// num_labels key). Throws Error if num_labels < 1.
void set_num_labels(nlohmann::json& hf_json, int num_labels);

// The HF config.json for this config (with architectures, id2label/label2id, model_type,
// every field from_pretrained reads), keys sorted and indented as transformers writes them.
std::string model_config_to_json(const ModelConfig& config);
// The same, keeping the keys of `original` (the config.json it was loaded from) that the
// config does not determine, e.g. "_name_or_path", "finetuning_task", "qa_dropout".
std::string model_config_to_json(const ModelConfig& config, const nlohmann::json& original);

}  // namespace bertfit
