// Model families: everything that makes one Hugging Face model_type differ from another,
// declared once per family in its adapter file (model/families/<type>.cc) and found by the
// config.json's model_type. The rest of the model code reads these declarations (names, keys,
// features); it never tests which family it runs.
//
// A family declares:
//   - its config.json keys (the sizes' names, every key `init --set` accepts) and how its own
//     keys are read and written (read_keys / write_keys);
//   - the tensor names of its checkpoints (embeddings, each encoder layer, the head);
//   - its features: token-type embeddings, dropout after the attention output projection, the
//     head's activation and where its dropout sits;
//   - the transformers classes that save and load it (model and tokenizer).
// Adding one: docs/DESIGN.md, "Adding a model family".
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/activation.h"
#include "model/head_kind.h"
#include "tokenizer/kind.h"

namespace bertfit {

struct ModelConfig;
class ConfigReader;

// The HF key of each family-neutral size and rate of ModelConfig.
struct ConfigKeyNames {
  const char* hidden;
  const char* layers;
  const char* heads;
  const char* intermediate;
  const char* activation;
  const char* hidden_dropout;
  const char* attention_dropout;
};

// How position ids are made: the token's index (BERT, DistilBERT), or, in the RoBERTa
// family, the count of non-padding tokens up to it plus pad_token_id (real tokens start at
// pad_token_id + 1; padding takes pad_token_id, whose embedding row is the padding row).
enum class PositionIds { kIndex, kAfterPadding };

// Tensor names: "<prefix><module>.weight" / ".bias".
struct EmbeddingNames {
  const char* prefix;      // "bert.embeddings."
  const char* word;        // "word_embeddings"
  const char* position;    // "position_embeddings"
  const char* token_type;  // "token_type_embeddings", or nullptr: no token types
  const char* layer_norm;  // "LayerNorm"
  // The Linear from the embedding size to the hidden size, a module of its own
  // ("electra.embeddings_project"), present when the config's embedding size differs from the
  // hidden size; nullptr: the family's embeddings are always hidden-sized.
  const char* projection;
};
struct LayerNames {
  const char* prefix;  // "bert.encoder.layer." (then the layer index and ".")
  // k and v nullptr: q names one fused (3C, C) module (ModernBERT's "attn.Wqkv"). Pre-norm
  // layers (LayerStructure::pre_norm): ln1 is the norm before attention, ln2 before the FFN.
  const char *q, *k, *v, *o, *ln1, *ff1, *ff2, *ln2;
};
// Relative-position embeddings shared by every layer (model/relative_positions.h): module names,
// or nullptr where the family has none.
struct RelativeNames {
  const char* embeddings;  // "deberta.encoder.rel_embeddings"
  const char* layer_norm;  // "deberta.encoder.LayerNorm"
};
// The sequence-classification head (model/head.h): logits = out(Drop(act(dense(Drop?(h[:,0]))))).
struct ClassifierHeadSpec {
  const char* dense;          // module name: "bert.pooler.dense", "pre_classifier"
  const char* out;            // "classifier"
  ActKind activation;         // tanh (BERT's pooler, RoBERTa), ReLU (DistilBERT), GELU (ELECTRA)
  bool dropout_before_dense;  // RoBERTa and ELECTRA drop the first token's state too
  // A LayerNorm after the activation (ModernBERT's "head.norm"): out(Drop(norm(act(dense)))).
  const char* norm = nullptr;
};

// The token-classification head (model/head.h): logits = out(Drop(h)) on every token.
struct TokenHeadSpec {
  const char* out;      // "classifier"
  bool hidden_dropout;  // its dropout is the hidden one (DistilBERT's `dropout`), not
                        // classifier_dropout ?? hidden_dropout_prob (the others)
  // ModernBERT's prediction head on every token first, the sequence head's dense layer and
  // norm (ClassifierHeadSpec, the config's activation): out(Drop(norm(act(dense(h))))).
  bool dense_and_norm = false;
};

struct ModelFamily {
  const char* model_type;       // config.json's "model_type"
  const char* model_class;      // transformers' class for sequence classification
  const char* tokenizer_class;  // what tokenizer_config.json names
  // The tokenizer its checkpoints ship: WordPiece (vocab.txt, which bertfit can write from a
  // vocabulary alone) or files of their own (byte-level BPE's vocab.json + merges.txt,
  // SentencePiece's model), which a saved model carries unchanged.
  TokenizerKind tokenizer;
  const char* base_prefix;  // the base model's module in checkpoints: "bert."
  ConfigKeyNames keys;
  std::vector<std::string> config_keys;  // every key of the HF config class
  EmbeddingNames embeddings;
  LayerNames layer;
  RelativeNames relative;  // {nullptr, nullptr}: no relative attention
  ClassifierHeadSpec head;
  TokenHeadSpec token_head;
  bool attention_output_dropout;  // dropout on the attention output projection (BertSelfOutput)
  // Padding rows are masked as DeBERTa masks them: their embeddings are zeroed and their
  // attention queries attend to nothing (XSoftmax on query and key). Only padding rows' states
  // differ (which unpadded execution never computes); the others' families leave them be.
  bool masks_padding_rows;
  PositionIds position_ids;
  // The norm after the last layer of pre-norm families (LayerStructure::pre_norm):
  // "model.final_norm".
  const char* final_norm = nullptr;

  // The HF defaults at the base size (layers, type_vocab_size, classifier_dropout, ...), over
  // the family-neutral defaults ModelConfig::defaults has already set.
  void (*defaults)(ModelConfig& c);
  // The family's own keys (not the sizes of `keys`), over the defaults: errors name the key.
  void (*read_keys)(const ConfigReader& r, ModelConfig& c);
  void (*write_keys)(const ModelConfig& c, nlohmann::json& j);

  // transformers' class for a head: model_class, "<prefix>ForTokenClassification", or the base
  // model "<prefix>Model" (an embedding model: sentence-transformers' Transformer module).
  std::string class_for(HeadKind head) const;

  // Configs point at their family: one object per family, never copied.
  struct Pinned {
    Pinned() = default;
    Pinned(const Pinned&) = delete;
    Pinned& operator=(const Pinned&) = delete;
  };
  [[no_unique_address]] Pinned pinned = {};
};

// The family of a model_type; Error naming the supported ones (and those planned) otherwise.
const ModelFamily& model_family(std::string_view model_type);
// Every supported family, in the order help texts list them.
const std::vector<const ModelFamily*>& model_families();
// "distilbert, bert" for messages and help.
std::string model_type_list();

}  // namespace bertfit
