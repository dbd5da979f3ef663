// The Dense modules of a sentence-transformers folder (docs/DESIGN.md, "Dense modules after the
// pooling"): their tensors are the embedding head's (ModelConfig::dense, named
// "<dense_module_path(i)>.linear.weight" / ".bias" in the layout), but live in each module's own
// folder rather than the encoder's weights. load_model and save_model (model_io.h) use these.
#pragma once

#include <string>

#include "model/config.h"
#include "model/param_layout.h"
#include "model/st_folder.h"

namespace bertfit {

// Reads each Dense module's linear.weight (out, in) and linear.bias (out) from its weights_file
// (safetensors or a PyTorch checkpoint) into the layout's entries of params. Throws Error naming
// the file for a missing tensor, a shape the module's config.json does not give, a non-floating
// dtype or a non-finite value.
void load_dense_tensors(const SentenceTransformerSpec& st, const ParamLayout& layout,
                        float* params);

// Writes dir/<dense_module_path(i)>/pytorch_model.bin for each of config's Dense modules
// (linear.weight and linear.bias, F32, as torch.save: io/pytorch_write.h), the one file
// sentence-transformers 2.2.2's Dense.load reads, and removes a model.safetensors beside it
// (later versions would prefer it). Creates the folders.
void write_dense_weights(const std::string& dir, const ModelConfig& config,
                         const ParamLayout& layout, const float* params);

}  // namespace bertfit
