// Resumable checkpoints: OUTPUT/checkpoint/ holds a loadable HF model folder (config.json,
// model.safetensors, vocab.txt, ...) plus optimizer.safetensors (Adam's m and v as flat
// tensors in ParamLayout order) and trainer_state.json (step, options, data position, the best
// evaluation so far). The folder is written as checkpoint.tmp, then swapped in by renames, so a
// crash at any moment leaves either the previous or the new checkpoint whole. With a limit of
// more than one, the previous checkpoint becomes OUTPUT/checkpoint-STEP instead of being
// removed, and the oldest of those go beyond the limit.
//
// OUTPUT/best/ (--load-best-model-at-end) is a model folder holding the best evaluation's
// weights, written the same way, with best_step.json naming its step.
//
// Also the rule that keeps a resumed run's global batch when the number of ranks changes
// (resume_step_shape).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "model/model_io.h"
#include "train/optimizer.h"

namespace bertfit {

// keep: checkpoints kept in all, the new one included (0: all).
void save_checkpoint(const std::string& output_dir, const ModelState& state,
                     const std::string& vocab_source, const AdamW& optimizer,
                     const nlohmann::json& trainer_state, std::int64_t keep = 1);

// OUTPUT/best: the model of the best evaluation, at `step`.
void save_best_model(const std::string& output_dir, const ModelState& state,
                     const std::string& vocab_source, std::int64_t step);
// Reads OUTPUT/best's parameters into state.params; Error when the folder is missing or holds
// the model of another step than `step` (e.g. a checkpoint older than the best folder).
void load_best_params(const std::string& output_dir, std::int64_t step, ModelState& state);

// Finds the checkpoint folder for --resume: DIR itself if it holds trainer_state.json, else
// DIR/checkpoint (or DIR/checkpoint.old left by an interrupted swap). Error otherwise.
std::string find_checkpoint(const std::string& dir);

// Loads the optimizer state of a checkpoint into `optimizer` (shapes checked) and returns the
// trainer state.
nlohmann::json load_checkpoint_state(const std::string& checkpoint_dir, AdamW& optimizer);
// The trainer state alone (checked to be an object with an integer "step").
nlohmann::json read_trainer_state(const std::string& checkpoint_dir);

// How each rank takes its part of an optimizer step: micro-batches of `batch` rows, `accum` of
// them (--batch-size, --grad-accum).
struct StepShape {
  int batch = 0, accum = 0;
  bool operator==(const StepShape&) const = default;
};

// The shape a resumed run on `world` ranks uses so that an optimizer step still takes the
// checkpoint's `global` samples (its run was started as `saved` on `saved_world` ranks, flags
// as saved; `given` is this run's --batch-size and --grad-accum):
//  - a `given` shape that keeps `global` is used as it is;
//  - the saved flags given again on another number of ranks adapt: the per-rank batch stays if
//    it divides global / world (the accumulation changes), else the accumulation stays if it
//    does (the batch changes), else the largest batch below the given one that divides it;
//    *note is set to an info line saying so;
// otherwise Error: another global batch (naming shapes that would keep it), or a global batch
// `world` ranks cannot share evenly (naming the rank counts that can).
StepShape resume_step_shape(std::int64_t global, StepShape saved, int saved_world, StepShape given,
                            int world, std::string* note);

}  // namespace bertfit
