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
#include "task/tagged_data.h"
#include "task/tagging.h"
#include "tokenizer/tokenizer.h"

namespace bertfit::cli {
namespace {

struct PredictOptions {
  InferenceOptions model;
  DataOptions data;  // the text columns, --no-header, --skip-malformed
  std::string input, output, id_column;
  double threshold = 0.5;
  Aggregation aggregation = Aggregation::kSimple;
};

void write_output(const PredictOptions& o, const std::string& out) {
  if (o.output.empty()) {
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else {
    write_file_atomic(o.output, out);
  }
}

// A token classifier's predictions: per input (pre-split words from a CoNLL or tagged JSONL
// file, or the texts of --text-a-column), its words, their tags and the entities.
void predict_tags(const PredictOptions& o, const InferenceModel& m) {
  const ModelState& state = m.state;
  const DataOptions& d = o.data;
  const ComputeOptions& c = o.model.compute;
  std::vector<TextToTag> texts;
  std::vector<std::int64_t> rows;  // each text's row in the file (malformed ones counted)
  std::vector<std::string> ids;    // --id-column's values
  std::vector<SkippedRow> skipped;
  const bool pre_split = is_tagged_data(d, o.input);
  if (pre_split) {
    if (!o.id_column.empty()) {
      throw_error("--id-column: tagged words (", o.input,
                  ") carry no id column; their lines' \"row\" numbers them in file order");
    }
    LoadedTagged words = read_tagged(d, o.input, state.config.id2label, /*with_tags=*/false);
    texts = texts_from_words(*m.tokenizer, words, c.max_seq_len);
    for (const TaggedSentence& s : words.sentences) rows.push_back(s.row);
    skipped = std::move(words.skipped);
  } else {
    if (d.text_a_column.empty()) {
      throw_error("--input ", o.input, ": give --text-a-column (raw texts), or tagged words (a ",
                  ".conll file, --format conll, or JSONL with --tokens-column)");
    }
    if (!d.text_b_column.empty()) {
      throw_error("--text-b-column: a token classifier tags one text at a time");
    }
    std::vector<std::string> specs = {d.text_a_column};
    if (!o.id_column.empty()) specs.push_back(o.id_column);
    ColumnTable table = read_columns(o.input, specs, table_options_of(d));
    warn_if_index_columns_with_header(table);
    require_rows(table);
    std::vector<std::string> raw;
    for (const auto& row : table.rows) {
      raw.push_back(row[0]);
      if (!o.id_column.empty()) ids.push_back(row.back());
    }
    if (table.skipped_rows > 0) {
      log_warn(o.input, ": skipped ", table.skipped_rows, " malformed rows");
    }
    texts = texts_from_raw(*m.tokenizer, raw, c.max_seq_len);
    rows = table.row_numbers;
    skipped = std::move(table.skipped);
  }
  std::vector<EncodedExample> encoded;
  for (const TextToTag& t : texts) encoded.push_back(t.encoded);
  if (pre_split) {
    report_word_truncation(o.input, encoded, c.max_seq_len);
  } else {
    report_truncation(o.input, encoded, c.max_seq_len);
  }
  BertModel model(state.config, state.layout, m.precision);
  const std::vector<float> logits = predict_logits(
      model, state.params.data(), encoded, c.batch_size, 8, nullptr, progress_reporter("predict"));
  const std::vector<std::int64_t> before = token_rows_before(encoded);
  const int K = state.config.num_labels;
  std::vector<nlohmann::json> lines;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const Tagging t = tag_text(texts[i], logits.data() + before[i] * K, state.config.id2label,
                               *m.tokenizer, o.aggregation);
    nlohmann::json tags = nlohmann::json::array();
    for (const std::string& tag : t.tags)
      tags.push_back(tag.empty() ? nlohmann::json() : nlohmann::json(tag));
    nlohmann::json entities = nlohmann::json::array();
    for (const Entity& e : t.entities) entities.push_back(entity_json(e, o.aggregation));
    nlohmann::json j{{"row", rows[i]}};
    if (!ids.empty()) j["id"] = ids[i];
    j.update({{"words", t.words}, {"tags", tags}, {"entities", entities}});
    lines.push_back(std::move(j));
  }
  write_output(o, in_file_order(lines, skipped));
}

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
  InferenceModel m = load_for_inference(o.model);
  if (m.state.config.head == HeadKind::kTokenClassification) return predict_tags(o, m);
  if (m.state.config.head == HeadKind::kEmbedding) {
    throw_error("--model ", o.model.model_dir,
                " is a sentence embedder: `bertfit embed` gives its vectors");
  }
  const ModelState& state = m.state;
  const DataOptions& d = o.data;
  if (d.text_a_column.empty()) throw_error("--text-a-column is required");
  std::vector<std::string> specs = {d.text_a_column};
  if (!d.text_b_column.empty()) specs.push_back(d.text_b_column);
  if (!o.id_column.empty()) specs.push_back(o.id_column);
  ColumnTable table = read_columns(o.input, specs, table_options_of(d));
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

  std::vector<nlohmann::json> lines;
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    nlohmann::json j{{"row", table.row_numbers[i]}};
    if (!o.id_column.empty()) j["id"] = table.rows[i].back();
    j.update(prediction(state.config, logits.data() + i * K, o.threshold));
    lines.push_back(std::move(j));
  }
  const std::string out = in_file_order(lines, table.skipped);
  write_output(o, out);
}

}  // namespace

void add_predict_command(CLI::App& app) {
  auto o = std::make_shared<PredictOptions>();
  CLI::App* cmd = app.add_subcommand(
      "predict",
      "Predict every row of a TSV/CSV/JSONL file: one JSON line per data row, in order, with its "
      "index (\"row\"): label id, label name and probabilities (single-label), every label's "
      "probability and the labels over --threshold (multi-label), or the score (regression). A "
      "row skipped by --skip-malformed gets a line {\"row\", \"line\", \"skipped\": why}. A "
      "token classifier: per input (tagged words: a .conll file, --format conll or JSONL with "
      "--tokens-column; or raw texts: --text-a-column) its words, one tag per word and the "
      "entities grouped as --aggregation-strategy, with character offsets into the text (the "
      "words joined by spaces).");
  add_inference_flags(*cmd, o->model);
  add_flags(*cmd, {{"--input",
                    "Input file (.tsv, .csv or .jsonl; '-': standard input, with "
                    "--format)",
                    &o->input}});
  add_flags(*cmd,
            select_flags(data_flags(o->data), {"--text-a-column", "--text-b-column", "--no-header",
                                               "--skip-malformed", "--format", "--tokens-column"}));
  add_flags(*cmd, {{"--id-column", "Column copied to each output line as \"id\"", &o->id_column},
                   {"--output", "Write predictions here (default: stdout)", &o->output},
                   {"--threshold", "Multi-label: a label applies when its probability exceeds this",
                    &o->threshold},
                   {"--aggregation-strategy",
                    "Token classifiers: how tokens group into entities, as transformers' "
                    "token-classification pipeline (simple: adjacent tokens of one type; first, "
                    "average, max: one tag per word first, from its first token, the mean or the "
                    "most confident token; none: every token)",
                    choice_target(o->aggregation, {{"simple", Aggregation::kSimple},
                                                   {"first", Aggregation::kFirst},
                                                   {"average", Aggregation::kAverage},
                                                   {"max", Aggregation::kMax},
                                                   {"none", Aggregation::kNone}})}});
  cmd->get_option("--input")->required();
  cmd->callback([o] { run(*o); });
}

}  // namespace bertfit::cli
