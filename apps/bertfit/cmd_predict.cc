// `bertfit predict`: one JSON line per data row of a TSV/CSV/JSONL file, in file order, with
// the row's 0-based index ("row", and "id" from --id-column): the label and the class
// probabilities (single-label), the probability of every label and those over --threshold
// (multi-label), or the score (regression). A row skipped with --skip-malformed gets a line
// that says why, so output lines and input rows always correspond.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/bertfit/cli_flags.h"
#include "apps/bertfit/commands.h"
#include "apps/bertfit/inference.h"
#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "data/batch.h"
#include "data/custom.h"
#include "model/model_io.h"
#include "task/dataset.h"
#include "task/evaluate.h"
#include "tokenizer/tokenizer.h"

namespace bertfit::cli {
namespace {

struct PredictOptions {
  InferenceOptions model;
  DataOptions data;  // the text columns, --no-header, --skip-malformed
  std::string input, output, id_column;
  double threshold = 0.5;
};

// The prediction of one row from its logits (K), as the model's problem type reads them.
nlohmann::json prediction(const ModelConfig& c, const float* row, double threshold) {
  const int K = c.num_labels;
  nlohmann::json j;
  switch (c.problem()) {
    case ProblemType::kRegression:
      j["score"] = row[0];
      break;
    case ProblemType::kMultiLabel: {
      nlohmann::json labels = nlohmann::json::array(), probs = nlohmann::json::object();
      for (int k = 0; k < K; ++k) {
        const double p = 1.0 / (1.0 + std::exp(-static_cast<double>(row[k])));
        probs[c.id2label.at(k)] = p;
        if (p > threshold) labels.push_back(c.id2label.at(k));
      }
      j["labels"] = labels;
      j["probabilities"] = probs;
      break;
    }
    case ProblemType::kSingleLabel: {
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
      j["label_name"] = c.id2label.at(best);
      j["probabilities"] = p;
      break;
    }
  }
  return j;
}

void run(const PredictOptions& o) {
  if (!(o.threshold >= 0 && o.threshold <= 1)) {
    throw_error("--threshold must be in [0, 1], got ", o.threshold);
  }
  InferenceModel m = load_for_inference(o.model, "predict");
  const ModelState& state = m.state;
  const DataOptions& d = o.data;
  std::vector<std::string> specs = {d.text_a_column};
  if (!d.text_b_column.empty()) specs.push_back(d.text_b_column);
  if (!o.id_column.empty()) specs.push_back(o.id_column);
  TableOptions table_options;
  table_options.header = !d.no_header;
  table_options.skip_malformed = d.skip_malformed;
  table_options.format = d.format;
  ColumnTable table = read_columns(o.input, specs, table_options);
  warn_if_index_columns_with_header(table);
  require_rows(table);
  std::vector<Example> examples(table.rows.size());
  for (std::size_t i = 0; i < table.rows.size(); ++i) {
    examples[i].text_a = table.rows[i][0];
    if (!d.text_b_column.empty()) examples[i].text_b = table.rows[i][1];
    examples[i].line = table.lines[i];
  }
  if (table.skipped_rows > 0)
    log_warn(o.input, ": skipped ", table.skipped_rows, " malformed rows");
  const ComputeOptions& c = o.model.compute;
  auto encoded = encode_examples(*m.tokenizer, examples, c.max_seq_len);
  report_truncation(o.input, encoded, c.max_seq_len);
  BertModel model(state.config, state.layout, m.precision);
  const int K = state.config.num_labels;
  std::vector<float> logits =
      encoded.empty() ? std::vector<float>{}
                      : predict_logits(model, state.params.data(), encoded, c.batch_size, 8,
                                       nullptr, progress_reporter("predict"));

  // Merge predicted and skipped rows back into file order.
  std::string out;
  std::size_t next_skipped = 0;
  auto emit_skipped_before = [&](std::int64_t row) {
    for (; next_skipped < table.skipped.size() && table.skipped[next_skipped].row < row;
         ++next_skipped) {
      const SkippedRow& s = table.skipped[next_skipped];
      nlohmann::json j{{"row", s.row}, {"line", s.line}, {"skipped", s.reason}};
      out += j.dump() + "\n";
    }
  };
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    emit_skipped_before(table.row_numbers[i]);
    nlohmann::json j{{"row", table.row_numbers[i]}};
    if (!o.id_column.empty()) j["id"] = table.rows[i].back();
    j.update(prediction(state.config, logits.data() + i * K, o.threshold));
    out += j.dump() + "\n";
  }
  emit_skipped_before(INT64_MAX);
  if (o.output.empty()) {
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else {
    write_file_atomic(o.output, out);
  }
}

}  // namespace

void add_predict_command(CLI::App& app) {
  auto o = std::make_shared<PredictOptions>();
  CLI::App* cmd = app.add_subcommand(
      "predict",
      "Predict every row of a TSV/CSV/JSONL file: one JSON line per data row, in order, with its "
      "index (\"row\"): label id, label name and probabilities (single-label), every label's "
      "probability and the labels over --threshold (multi-label), or the score (regression). A "
      "row skipped by --skip-malformed gets a line {\"row\", \"line\", \"skipped\": why}.");
  add_inference_flags(*cmd, o->model);
  add_flags(*cmd, {{"--input",
                    "Input file (.tsv, .csv or .jsonl; '-': standard input, with "
                    "--format)",
                    &o->input}});
  add_flags(*cmd,
            select_flags(data_flags(o->data), {"--text-a-column", "--text-b-column", "--no-header",
                                               "--skip-malformed", "--format"}));
  add_flags(*cmd, {{"--id-column", "Column copied to each output line as \"id\"", &o->id_column},
                   {"--output", "Write predictions here (default: stdout)", &o->output},
                   {"--threshold", "Multi-label: a label applies when its probability exceeds this",
                    &o->threshold}});
  cmd->get_option("--input")->required();
  cmd->get_option("--text-a-column")->required();
  cmd->callback([o] { run(*o); });
}

}  // namespace bertfit::cli
