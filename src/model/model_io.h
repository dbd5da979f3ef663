// Hugging Face model folders: config.json + model.safetensors + tokenizer files, loaded into
// and saved from the one flat fp32 parameter buffer described by ParamLayout.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/aligned.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/param_layout.h"

namespace bertfit {

struct ModelState {
  ModelConfig config;
  ParamLayout layout;           // built from config
  AlignedBuffer<float> params;  // layout.total() floats
  nlohmann::json hf_config;     // config.json as loaded (its other keys are kept on save)

  ModelState() : layout(config) {}
  explicit ModelState(const ModelConfig& c) : config(c), layout(config), params(layout.total()) {}
};

// How a checkpoint's tensors map onto a layout (header only, no data read).
struct CheckpointMatch {
  std::vector<const TensorInfo*> tensors;  // per layout entry; nullptr: a head to initialise
  std::vector<std::string> initialised;    // head modules absent from the checkpoint
  std::vector<std::string> ignored;        // floating tensors the layout does not use
  bool base_model_names = false;           // names lack the "distilbert." / "bert." prefix
};

// Checks that every layout tensor is in the file with exactly its shape and a floating dtype.
// Accepts base-model names (saved from DistilBertModel / BertModel: no prefix) and a missing
// head (pre_classifier / pooler, classifier; each module wholly absent) as from_pretrained
// does. Non-floating buffers (e.g. bert.embeddings.position_ids) are skipped. Throws Error
// naming the file and the tensor.
CheckpointMatch match_checkpoint(const SafetensorsFile& file, const ParamLayout& layout,
                                 const ModelConfig& config);

// dir/model.safetensors after checking that dir is a folder holding it; otherwise an Error
// (with conversion instructions when only pytorch_model.bin is there).
std::string model_weights_path(const std::string& dir);

// Loads dir/config.json and dir/model.safetensors. Head modules absent from the checkpoint are
// initialised as transformers does (with head_init_seed), with a log line; unused floating
// tensors are ignored with a warning. Throws Error for a missing folder or file (a folder with
// only pytorch_model.bin gets instructions to convert it), or any mismatch.
ModelState load_model(const std::string& dir, std::uint64_t head_init_seed = 42);

// Writes dir/config.json, dir/model.safetensors (F32, HF names, layout order), vocab.txt and
// tokenizer_config.json / special_tokens_map.json, each atomically. vocab_source is a vocab
// file or a model folder holding vocab.txt (whose tokenizer settings are then kept). Creates
// dir; throws Error if it is a file or the vocabulary is larger than config.vocab_size.
void save_model(const std::string& dir, const ModelState& state, const std::string& vocab_source);

// Number of tokens in a vocab.txt (one per line, as BertTokenizer reads it).
std::int64_t count_vocab_lines(const std::string& text);

}  // namespace bertfit
