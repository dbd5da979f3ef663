// The sentence-transformers side of model folders (model_io.h, st_weights.h): a folder's modules
// as the model's config, and the Dense modules' tensors read from and written to their own
// module folders.
#include "model/st_weights.h"

#include <cmath>
#include <filesystem>

#include "base/check.h"
#include "base/error.h"
#include "base/file.h"
#include "io/checkpoint.h"
#include "io/pytorch_write.h"
#include "model/model_io.h"

namespace bertfit {

void use_sentence_transformer(const SentenceTransformerSpec& st, const std::string& dir,
                              ModelConfig& config) {
  const std::string modules = join_path(dir, "modules.json");
  if (!st.transformer_path.empty()) {
    throw_error(modules, ": the Transformer module is in '", st.transformer_path,
                "'; bertfit reads a sentence-transformers folder whose encoder is the folder "
                "itself (path \"\")");
  }
  if (st.dense.size() > static_cast<std::size_t>(kMaxDenseModules)) {
    throw_error(modules, ": ", st.dense.size(), " Dense modules; bertfit runs at most ",
                kMaxDenseModules);
  }
  for (const DenseModule& d : st.dense) {
    if (!d.bias) {
      throw_error(join_path(join_path(dir, d.path), "config.json"),
                  ": a Dense module without a bias (bias false) is not supported yet");
    }
  }
  if (!st.include_prompt) {
    throw_error(join_path(dir, "1_Pooling/config.json"),
                ": include_prompt false (pooling without the prompt's tokens) is not supported "
                "yet");
  }
  if (st.word_embedding_dimension != 0 && st.word_embedding_dimension != config.hidden) {
    throw_error(modules, ": the Pooling module's word_embedding_dimension is ",
                st.word_embedding_dimension, " but the encoder's hidden size is ", config.hidden);
  }
  config.head = HeadKind::kEmbedding;
  config.pooling = st.pooling;
  config.dense.clear();
  for (const DenseModule& d : st.dense) {
    config.dense.push_back({d.in_features, d.out_features, d.activation});
  }
  config.normalize = st.normalize;
}

// The Dense modules' tensors (linear.weight (out, in), linear.bias (out)) from each module's
// own file into the layout's entries. Error naming the file for a missing tensor or a shape the
// module's config.json does not give.
void load_dense_tensors(const SentenceTransformerSpec& st, const ParamLayout& layout,
                        float* params) {
  for (std::size_t i = 0; i < st.dense.size(); ++i) {
    const std::string& file = st.dense[i].weights_file;
    const Checkpoint weights =
        Checkpoint::open(file, file.ends_with(".safetensors") ? CheckpointFormat::kSafetensors
                                                              : CheckpointFormat::kPytorch);
    for (const char* name : {"linear.weight", "linear.bias"}) {
      const bool is_weight = std::string_view(name) == "linear.weight";
      const Role role = is_weight ? dense_role(i) : dense_bias_role(i);
      const ParamEntry& e = layout.entry(role);
      const CheckpointTensor* t = weights.find(name);
      if (t == nullptr) {
        throw_error(file, ": tensor '", name, "' is missing; a Dense module holds linear.weight ",
                    "and linear.bias");
      }
      if (t->shape != e.shape) {
        throw_error(t->file, ": tensor '", name, "' has shape ", t->shape.str(), ", expected ",
                    e.shape.str(), " from the Dense module's config.json (in_features ",
                    st.dense[i].in_features, ", out_features ", st.dense[i].out_features, ")");
      }
      if (!is_floating(t->dtype)) {
        throw_error(t->file, ": tensor '", name, "' has dtype ", safetensors_dtype_name(t->dtype),
                    ", expected a floating-point tensor");
      }
      read_f32(*t, params + e.offset);
      for (std::int64_t k = 0; k < e.size; ++k) {
        if (!std::isfinite(params[e.offset + k])) {
          throw_error(t->file, ": tensor '", name, "' holds ", params[e.offset + k], " at element ",
                      k, "; a model's weights must be finite numbers");
        }
      }
    }
  }
}

// dir/<dense_module_path(i)>/pytorch_model.bin of each Dense module: linear.weight and
// linear.bias in F32 as torch.save writes them, the one file sentence-transformers 2.2.2's
// Dense.load reads (later versions too, without a model.safetensors beside it: a stale one in
// the output folder is removed, or it would be loaded instead). docs/DESIGN.md. The module
// folders' config.json is write_sentence_transformer's.
void write_dense_weights(const std::string& dir, const ModelConfig& config,
                         const ParamLayout& layout, const float* params) {
  for (std::size_t i = 0; i < config.dense.size(); ++i) {
    const ParamEntry& w = layout.entry(dense_role(i));
    const ParamEntry& b = layout.entry(dense_bias_role(i));
    const std::string folder = join_path(dir, dense_module_path(i));
    make_directories(folder);
    write_pytorch_state_dict(join_path(folder, "pytorch_model.bin"),
                             {{"linear.weight", SafetensorsDType::kF32, w.shape, params + w.offset},
                              {"linear.bias", SafetensorsDType::kF32, b.shape, params + b.offset}});
    std::filesystem::remove(join_path(folder, "model.safetensors"));
  }
}

}  // namespace bertfit
