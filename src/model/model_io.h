// Hugging Face model folders: config.json + weights (model.safetensors, pytorch_model.bin, or
// either sharded behind its index) + tokenizer files, loaded into and saved from the one flat
// fp32 parameter buffer described by ParamLayout. Saving writes model.safetensors.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/aligned.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/st_folder.h"

namespace bertfit {

struct ModelState {
  ModelConfig config;
  ParamLayout layout;           // built from config
  AlignedBuffer<float> params;  // layout.total() floats
  nlohmann::json hf_config;     // config.json as loaded (its other keys are kept on save)
  // The folder's sentence-transformers modules (an embedding model, ModelConfig::pooling), when
  // it has a modules.json.
  std::optional<SentenceTransformerSpec> sentence_transformer;
  // A sentence-transformers embedder keeps its folder's weights as they were named (issue 46):
  // base_model_names when they lack the family's prefix ("bert.", as the Transformer module
  // saves them), and `kept`, every tensor of the file its layout does not use (BERT's
  // pooler.dense.*, buffers such as embeddings.position_ids), read as they were; save_model
  // writes both back, so the folder round-trips tensor for tensor.
  struct KeptTensor {
    std::string name;
    SafetensorsDType dtype;
    Shape shape;
    std::vector<std::byte> bytes;
  };
  bool base_model_names = false;
  std::vector<KeptTensor> kept;

  ModelState() : layout(config) {}
  explicit ModelState(const ModelConfig& c) : config(c), layout(config), params(layout.total()) {}
};

// How a checkpoint's tensors map onto a layout (names, shapes and dtypes only, no data read).
// Names rather than pointers, so that a match outlives the Checkpoint it was made from.
struct CheckpointMatch {
  // Per layout entry: the tensor's name in the checkpoint, or "" for a head to initialise.
  std::vector<std::string> names;
  std::vector<std::string> initialised;  // head modules absent from the checkpoint
  // "classifier.weight: found shape [2, 32] in the checkpoint and [3, 32] in the model": the
  // classifier tensors of another number of outputs, initialised anew (reinit_mismatched_head).
  std::vector<std::string> mismatched;
  std::vector<std::string> ignored;  // floating tensors the layout does not use
  bool base_model_names = false;     // names lack the "distilbert." / "bert." prefix
};

// Checks that every layout tensor is in the checkpoint with exactly its shape and a floating
// dtype. Accepts base-model names (saved from DistilBertModel / BertModel: no prefix) and a
// missing head (pre_classifier / pooler, classifier; each module wholly absent) as
// from_pretrained does. When config.other_architecture names another class (a token
// classifier, a base model), the head modules outside the base model (all but BERT's pooler)
// are initialised whatever the checkpoint holds under their names, which are then ignored.
// Non-floating buffers (e.g. bert.embeddings.position_ids) are skipped. Throws Error naming the
// file (the index, for a tensor missing from a sharded checkpoint) and the tensor. With
// reinit_mismatched_head, classifier tensors whose shape differs are not an error but initialised
// anew (transformers' ignore_mismatched_sizes).
CheckpointMatch match_checkpoint(const Checkpoint& checkpoint, const ParamLayout& layout,
                                 const ModelConfig& config, bool reinit_mismatched_head = false);

// The number of outputs of the head's output product in the weights of model folder `dir` (the
// first dimension of the family's classifier.weight, classifier.out_proj.weight, ... for
// config.head), or nullopt
// when they hold none (a base model, whose head a run must create). Reads tensor headers only.
std::optional<int> checkpoint_head_outputs(const std::string& dir, const ModelConfig& config);

// The weights of model folder `dir` in transformers' order of preference
// (PreTrainedModel.from_pretrained): dir/model.safetensors, model.safetensors.index.json,
// pytorch_model.bin, pytorch_model.bin.index.json, the first that exists. Throws Error if dir
// is not a folder or holds none of them.
std::string model_weights_path(const std::string& dir);

// Opens model_weights_path(dir) in its format, with its shards if it is an index.
Checkpoint open_model_weights(const std::string& dir);

struct LoadOptions {
  // Replaces config.json's reading (a training run's labels and problem type); config.json's
  // other keys are still kept for saving. Null: config.json as it is.
  const ModelConfig* config = nullptr;
  bool reinit_mismatched_head = false;  // see match_checkpoint
  std::uint64_t head_init_seed = 42;
  // Inference (eval, predict, forward, serve): the model must hold a trained sequence-
  // classification head. Error when config.json's architectures names another class (a base
  // model, another task's head: model/architecture.h) or, whatever it names, when any head
  // tensor is missing; training starts a new head instead.
  bool require_head = false;
  // Run the model as a sentence embedder with this pooling (TEI's --pooling): a plain encoder
  // gets the embedding head (without Normalize; its modules written as such when saved), a
  // sentence-transformers folder's Pooling module is overridden. Unset: the folder decides.
  std::optional<Pooling> pooling = std::nullopt;
};

// Loads dir/config.json and the folder's weights (open_model_weights); fp16, bf16 and fp64
// tensors become fp32. The config's other_architecture is always dir/config.json's (also with
// options.config), since it says what the weights hold. Head modules absent from the checkpoint (or
// mismatched, with reinit_mismatched_head) are initialised as transformers does (with
// head_init_seed), said once on stderr in transformers' words; unused floating tensors are ignored
// with a warning. Throws Error for a missing folder or file, a checkpoint bertfit refuses (see
// io/pytorch.h and io/checkpoint.h), any mismatch, or a parameter that is NaN or infinite (naming
// the tensor).
ModelState load_model(const std::string& dir, const LoadOptions& options = {});

// The config of a sentence-transformers folder's model: `config` (the encoder's) with the
// embedding head of the spec's pooling and Normalize modules. Error naming the file and module
// for what bertfit cannot run (a nested Transformer folder, a Dense module without a bias,
// include_prompt false, a pooling width other than the hidden size). do_lower_case is the
// tokenizer's to apply (Tokenizer::set_lowercase_input; the commands set it).
void use_sentence_transformer(const SentenceTransformerSpec& st, const std::string& dir,
                              ModelConfig& config);

// Writes dir/config.json, dir/model.safetensors (F32, HF names, layout order) and the
// tokenizer, each file atomically. WordPiece families: vocab.txt and tokenizer_config.json /
// special_tokens_map.json, vocab_source being a vocab file or a model folder holding vocab.txt
// (whose tokenizer settings are then kept). Families with tokenizer files of their own
// (model/family.h): vocab_source is a folder holding them, copied unchanged. Creates dir;
// throws Error if it is a file, the tokenizer files are missing, or the vocabulary is larger
// than config.vocab_size. A model with a sentence_transformer spec is written as a
// sentence-transformers folder (its module files too: model/st_folder.h).
void save_model(const std::string& dir, const ModelState& state, const std::string& vocab_source);

// Number of tokens in a vocab.txt (one per line, as BertTokenizer reads it).
std::int64_t count_vocab_lines(const std::string& text);

}  // namespace bertfit
