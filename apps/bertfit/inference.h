// What `eval`, `predict` and `embed` share: the model and compute flag groups (--model, --revision,
// --precision, --threads, --batch-size, --max-seq-len; flags/groups.h), and loading the model
// (a folder, or a Hub repository id resolved by model_source.h) for inference with the checks a
// user can trip (tokenizer vs vocab_size, --max-seq-len vs max_position_embeddings).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/table.h"
#include "flags/groups.h"
#include "model/bert.h"
#include "model/model_io.h"
#include "tokenizer/tokenizer.h"

namespace bertfit::cli {

struct InferenceOptions {
  std::string model_dir;  // --model as given: a folder or a Hub repository id
  std::string revision = "main";
  ComputeOptions compute;
  std::optional<Pooling> pooling;  // embed's --pooling (LoadOptions::pooling)
  std::string tuned_config;        // --config: applied by main before parsing (tuned_config.h)
};

// --model (required), --revision, the compute group and --config (a tuned.json).
void add_inference_flags(CLI::App& cmd, InferenceOptions& o);

struct InferenceModel {
  ModelState state;
  std::unique_ptr<Tokenizer> tokenizer;
  Precision precision;  // what runs here (runnable_precision)
};

// Sets the thread count, resolves --model, loads the folder (refusing a model without a trained
// head: LoadOptions::require_head) and its tokenizer, and validates the options.
InferenceModel load_for_inference(const InferenceOptions& o);

// The table options of the data flags (--no-header, --skip-malformed, --format).
TableOptions table_options_of(const DataOptions& d);

// The output of predict and embed: one JSON line per input, each with its "row", and one per
// malformed row left out ({"row", "line", "skipped": reason}), merged in file order. Both lists
// are in file order.
std::string in_file_order(const std::vector<nlohmann::json>& lines,
                          const std::vector<SkippedRow>& skipped);

// Progress of a long inference run on stderr ("what: done/total rows"): every 2 s (or
// $BERTFIT_PROGRESS_SECONDS), and a last line at the end of a run that reported before.
std::function<void(std::int64_t, std::int64_t)> progress_reporter(const std::string& what);

}  // namespace bertfit::cli
