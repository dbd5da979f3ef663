// `bertfit predict`: labels and probabilities (or regression scores) for every row of a file.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/bertfit/commands.h"
#include "apps/bertfit/inference.h"
#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "base/parallel.h"
#include "data/batch.h"
#include "data/custom.h"
#include "model/model_io.h"
#include "tokenizer/tokenizer.h"
#include "train/dataset.h"
#include "train/evaluate.h"

namespace bertfit::cli {
namespace {

struct PredictOptions {
  InferenceOptions model;
  std::string input, output, text_a, text_b;
  bool no_header = false, skip_malformed = false;
};

void run(const PredictOptions& o) {
  InferenceModel m = load_for_inference(o.model);
  const ModelState& state = m.state;
  ColumnSpec columns;
  columns.text_a = o.text_a;
  if (!o.text_b.empty()) columns.text_b = o.text_b;
  CustomFileOptions file_options;
  file_options.table.header = !o.no_header;
  file_options.table.skip_malformed = o.skip_malformed;
  LoadedExamples loaded = load_custom_file(o.input, columns, file_options);
  if (loaded.skipped_rows > 0)
    log_warn(o.input, ": skipped ", loaded.skipped_rows, " malformed rows");
  auto encoded = encode_examples(m.tokenizer, loaded.examples, o.model.max_seq_len);
  BertModel model(state.config, state.layout, m.precision);
  const int K = state.config.num_labels;
  std::vector<float> logits =
      predict_logits(model, state.params.data(), encoded, o.model.batch_size, 8);

  std::string out;
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    const float* row = logits.data() + i * K;
    nlohmann::json j;
    if (state.config.is_regression()) {
      j["score"] = row[0];
    } else {
      double mx = row[0];
      for (int k = 1; k < K; ++k) mx = std::max<double>(mx, row[k]);
      std::vector<double> p(K);
      double sum = 0;
      for (int k = 0; k < K; ++k) sum += p[k] = std::exp(row[k] - mx);
      int best = 0;
      for (int k = 0; k < K; ++k) {
        p[k] /= sum;
        if (p[k] > p[best]) best = k;
      }
      j["label"] = best;
      j["label_name"] = state.config.id2label.at(best);
      j["probabilities"] = p;
    }
    out += j.dump() + "\n";
  }
  if (o.output.empty()) {
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else {
    write_file_atomic(o.output, out);
  }
}

void setup(CLI::App& app) {
  auto o = std::make_shared<PredictOptions>();
  CLI::App* cmd = app.add_subcommand(
      "predict",
      "Predict every row of a TSV/CSV/JSONL file; writes JSON lines with the label "
      "id, label name and probabilities (or the score for regression).");
  add_inference_options(*cmd, o->model);
  cmd->add_option("--input", o->input, "Input file (.tsv, .csv or .jsonl)")->required();
  cmd->add_option("--text-a-column", o->text_a, "First text column (index or header name)")
      ->required();
  cmd->add_option("--text-b-column", o->text_b, "Second text column, for sentence pairs");
  cmd->add_option("--output", o->output, "Write predictions here (default: stdout)");
  cmd->add_flag("--no-header", o->no_header, "The first line is data, not a header");
  cmd->add_flag("--skip-malformed", o->skip_malformed, "Skip rows with missing columns");
  cmd->callback([o] { run(*o); });
}

CommandRegistrar registrar(60, setup);

}  // namespace
}  // namespace bertfit::cli
