// Resumable checkpoints: OUTPUT/checkpoint/ holds a loadable HF model folder (config.json,
// model.safetensors, vocab.txt, ...) plus optimizer.safetensors (Adam's m and v as flat
// tensors in ParamLayout order) and trainer_state.json (step, options, data position). The
// folder is written as checkpoint.tmp, then swapped in by renames, so a crash at any moment
// leaves either the previous or the new checkpoint whole.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/model_io.h"
#include "train/optimizer.h"

namespace bertfit {

void save_checkpoint(const std::string& output_dir, const ModelState& state,
                     const std::string& vocab_source, const AdamW& optimizer,
                     const nlohmann::json& trainer_state);

// Finds the checkpoint folder for --resume: DIR itself if it holds trainer_state.json, else
// DIR/checkpoint (or DIR/checkpoint.old left by an interrupted swap). Error otherwise.
std::string find_checkpoint(const std::string& dir);

// Loads the optimizer state of a checkpoint into `optimizer` (shapes checked) and returns the
// trainer state.
nlohmann::json load_checkpoint_state(const std::string& checkpoint_dir, AdamW& optimizer);

}  // namespace bertfit
