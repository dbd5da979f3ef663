// What `eval` and `predict` share: the model and compute flags (--model, --batch-size,
// --max-seq-len, --threads, --precision), declared once, and loading a model folder for
// inference with the checks a user can trip (tokenizer vs vocab_size, --max-seq-len vs
// max_position_embeddings).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>

#include "model/bert.h"
#include "model/model_io.h"
#include "tokenizer/tokenizer.h"

namespace bertfit::cli {

struct InferenceOptions {
  std::string model_dir;
  int batch_size = 32;
  int max_seq_len = 128;
  int threads = 0;
  std::string precision = "fp32";
};

void add_inference_options(CLI::App& cmd, InferenceOptions& o);

struct InferenceModel {
  ModelState state;
  WordPieceTokenizer tokenizer;
  Precision precision;
};

// Sets the thread count, loads the folder and its tokenizer, and validates the options.
InferenceModel load_for_inference(const InferenceOptions& o);

// Progress of a long inference run on stderr ("what: done/total rows"): every 2 s (or
// $BERTFIT_PROGRESS_SECONDS), and a last line at the end of a run that reported before.
std::function<void(std::int64_t, std::int64_t)> progress_reporter(const std::string& what);

}  // namespace bertfit::cli
