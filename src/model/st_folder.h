// Reading a sentence-transformers folder's module files (modules.json, the Transformer's
// sentence_bert_config.json, 1_Pooling/config.json, Dense configs,
// config_sentence_transformers.json) into a SentenceTransformerSpec: what the pooling head needs,
// as sentence-transformers 2.2.2 and later write it. Knows the files, not the weights: the encoder
// and Dense tensors are read by model_io. Every module bertfit cannot run is an Error naming the
// file and the module.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/pooling.h"

namespace bertfit {

// A sentence_transformers.models.Dense module: y = activation(W x + b), W (out, in).
struct DenseModule {
  int in_features = 0;
  int out_features = 0;
  bool bias = true;
  DenseActivation activation = DenseActivation::kTanh;
  std::string activation_name;  // as the config spells it: "torch.nn.modules.activation.Tanh"
  std::string path;             // the module's folder relative to the model folder: "2_Dense"
  // dir/path/model.safetensors if present, else dir/path/pytorch_model.bin (sentence-transformers'
  // own preference); tensors "linear.weight" (out, in) and "linear.bias" (out).
  std::string weights_file;
};

struct SentenceTransformerSpec {
  // The enabled modes in sentence-transformers' concatenation order (Pooling.forward):
  // cls, max, mean, mean_sqrt_len, lasttoken. The pooled vector is pooling.size() × dim long.
  std::vector<Pooling> pooling;
  int word_embedding_dimension = 0;
  // Pooling's include_prompt (newer versions): false pools without the prompt's tokens. A
  // consumer that cannot leave them out must refuse a prompt on such a model.
  bool include_prompt = true;
  std::vector<DenseModule> dense;  // in module order, after the pooling
  bool normalize = false;          // a Normalize module (always the last one)

  // sentence_bert_config.json (in the Transformer's folder); nullopt: the encoder's own limit.
  std::optional<int> max_seq_length;
  bool do_lower_case = false;

  // config_sentence_transformers.json (absent in files of 2.2.2 and older: these defaults).
  std::map<std::string, std::string> prompts;  // name -> text prepended to the input
  std::string default_prompt_name;             // "" = none; otherwise a key of prompts
  std::string similarity_fn_name = "cosine";   // cosine, dot, euclidean or manhattan

  std::string transformer_path;  // modules.json's Transformer path ("" = the folder itself)
};

// The folder's spec; nullopt when dir has no modules.json (a plain encoder folder).
std::optional<SentenceTransformerSpec> read_sentence_transformer(const std::string& dir);

// Writes the spec's module files into dir (whose encoder files the caller writes), as
// sentence-transformers 2.2.2's save() lays them out, which it and later versions load:
// modules.json (Transformer at "", 1_Pooling, the Dense modules, Normalize when normalizing),
// sentence_bert_config.json, 1_Pooling/config.json, an empty 2_Normalize/ and
// config_sentence_transformers.json (with the prompts and similarity_fn_name when not the
// defaults). Dense modules go between the pooling and Normalize, each in dense_module_path(i)
// with its config.json (their weights are model_io's), Normalize after them ("3_Normalize" after
// one Dense). Each file atomically.
void write_sentence_transformer(const std::string& dir, const SentenceTransformerSpec& spec);

// The length of the embedding the spec produces: the last Dense's out_features, else the pooled
// width (pooling modes × word_embedding_dimension).
int sentence_embedding_dimension(const SentenceTransformerSpec& spec);

const char* dense_activation_name(DenseActivation activation);  // tanh, identity, relu, gelu

}  // namespace bertfit
