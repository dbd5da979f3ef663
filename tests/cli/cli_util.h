// Helpers for end-to-end tests of the bertfit binary: run a command line and capture its exit
// code, stdout and stderr; temporary folders; tiny models made with `bertfit init`.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/util/temp_dir.h"  // TempDir

namespace bertfit::testing {

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

// The bertfit binary of this build tree and the shared reference folder.
std::string bertfit_binary();
std::string shared_dir();

// Runs `bertfit <args>` through /bin/sh (args are shell words) with stdin from /dev/null.
RunResult run_bertfit(const std::string& args);
// The same with `input` as standard input.
RunResult run_bertfit_stdin(const std::string& args, const std::string& input);

// `bertfit init` of a tiny model (2 layers, hidden 32, 2 heads) with num_labels labels into dir.
void init_tiny_model(const std::string& dir, const std::string& arch = "distilbert",
                     int num_labels = 2, int seed = 7);

std::string read_text(const std::string& path);

// The last non-empty line of a command's output (e.g. the JSON summary `eval` prints last).
std::string last_line(const std::string& out);
// Python's text[start:end] on the code points of a UTF-8 text (bounds clamped).
std::string char_slice(const std::string& text, std::int64_t start, std::int64_t end);
void write_text(const std::string& path, const std::string& text);

// Sentence-embedding tests (the golden folders' texts.json and golden.safetensors):
// texts.json's "texts" list;
std::vector<std::string> fixture_texts(const std::string& dir);
// the texts as JSONL rows {"text": t} written to path (which is returned);
std::string write_text_rows(const std::string& path, const std::vector<std::string>& texts);
// a golden file's eval.embeddings as n rows;
std::vector<std::vector<float>> golden_embeddings(const std::string& safetensors, std::size_t n);
// the "embedding" of each line `bertfit embed` printed;
std::vector<std::vector<float>> embeddings_of(const std::string& out);
// the largest |a[i] - b[i]| (the sizes must agree), and the cosine of a and b.
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);
double cosine(const std::vector<float>& a, const std::vector<float>& b);

// Every floating tensor of a safetensors file as floats (integer buffers such as position_ids
// left out): by name, or all concatenated in file order.
std::map<std::string, std::vector<float>> tensors_of(const std::string& path);
std::vector<float> all_params(const std::string& path);

// The parameters `bertfit train` saved in `weights` against golden_dir's final.<name> tensors
// after the golden.json `trajectory` t: ‖ours − HF's‖ ≤ 2e-3 ‖HF's‖ per tensor, but for the
// attention key biases, whose true gradient is zero and whose AdamW updates are the sign of
// rounding noise in either implementation: there every element within 2·Σ lr of HF's
// (tests/golden/golden_test.cc argues both).
void expect_final_parameters(const std::string& weights, const std::string& golden_dir,
                             const nlohmann::json& t);

}  // namespace bertfit::testing
