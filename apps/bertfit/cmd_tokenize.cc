// `bertfit tokenize`: encodes one column (or a pair of columns) of a TSV/CSV/JSONL file with a
// WordPiece tokenizer and prints one JSON line per row:
//   {"input_ids":[...],"token_type_ids":[...],"attention_mask":[...]}
// without padding, truncated to --max-seq-len. Useful to compare against HF tokenizers.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "apps/bertfit/commands.h"
#include "base/error.h"
#include "base/log.h"
#include "data/batch.h"
#include "data/table.h"
#include "tokenizer/tokenizer.h"

namespace bertfit::cli {
namespace {

struct TokenizeOptions {
  std::string model_dir;
  std::string vocab_file;
  std::string tokenizer_file;
  std::string input;
  std::string text_a_column;
  std::string text_b_column;
  std::string format;
  int max_seq_len = 512;
  bool no_header = false;
  bool skip_malformed = false;
};

WordPieceTokenizer load_tokenizer(const TokenizeOptions& o) {
  int given = !o.model_dir.empty() + !o.vocab_file.empty() + !o.tokenizer_file.empty();
  if (given != 1) {
    throw_error("tokenize: give exactly one of --model, --vocab and --tokenizer (got ", given, ")");
  }
  if (!o.model_dir.empty()) return WordPieceTokenizer::from_model_dir(o.model_dir);
  if (!o.vocab_file.empty()) return WordPieceTokenizer::from_vocab_file(o.vocab_file);
  return WordPieceTokenizer::from_tokenizer_json(o.tokenizer_file);
}

void append_ids(std::string& out, const char* key, const std::vector<std::int32_t>& ids) {
  out += '"';
  out += key;
  out += "\":[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids[i]);
  }
  out += ']';
}

void write_stdout(const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) {
    throw_error("tokenize: writing to standard output failed");
  }
}

void run_tokenize(const TokenizeOptions& o) {
  const bool pair = !o.text_b_column.empty();
  const int min_len = pair ? 3 : 2;  // [CLS] a [SEP] (b [SEP])
  if (o.max_seq_len < min_len) {
    throw_error("--max-seq-len must be at least ", min_len, " (room for [CLS] and [SEP]",
                pair ? " and the second [SEP] of a pair" : "", "), got ", o.max_seq_len);
  }
  WordPieceTokenizer tokenizer = load_tokenizer(o);

  std::vector<std::string> columns = {o.text_a_column};
  if (pair) columns.push_back(o.text_b_column);
  TableOptions table_options;
  if (!o.format.empty()) table_options.format = parse_table_format(o.format);
  table_options.header = !o.no_header;
  table_options.skip_malformed = o.skip_malformed;
  ColumnTable table = read_columns(o.input, columns, table_options);
  warn_if_index_columns_with_header(table);
  require_rows(table);
  if (table.skipped_rows > 0) {
    log_warn("tokenize: skipped ", table.skipped_rows, " malformed row(s) of ", o.input);
  }

  std::vector<Example> examples(table.rows.size());
  for (std::size_t i = 0; i < table.rows.size(); ++i) {
    examples[i].text_a = std::move(table.rows[i][0]);
    if (pair) examples[i].text_b = std::move(table.rows[i][1]);
    examples[i].line = table.lines[i];
  }
  std::vector<EncodedExample> encoded = encode_examples(tokenizer, examples, o.max_seq_len);

  std::string out;
  for (const EncodedExample& e : encoded) {
    out += '{';
    append_ids(out, "input_ids", e.ids);
    out += ',';
    append_ids(out, "token_type_ids", e.type_ids);
    out += ',';
    append_ids(out, "attention_mask", std::vector<std::int32_t>(e.ids.size(), 1));
    out += "}\n";
    if (out.size() > (1 << 20)) {
      write_stdout(out);
      out.clear();
    }
  }
  write_stdout(out);
  if (std::fflush(stdout) != 0) throw_error("tokenize: writing to standard output failed");
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize",
      "Tokenize a column (or a pair of columns) of a TSV/CSV/JSONL file and print one JSON line "
      "per row: {\"input_ids\":[...],\"token_type_ids\":[...],\"attention_mask\":[...]} "
      "([CLS] a [SEP] (b [SEP]), no padding, truncated longest-first to --max-seq-len).");
  cmd->add_option("--model", o->model_dir,
                  "Model folder: uses its vocab.txt (do_lower_case from tokenizer_config.json) or "
                  "else its tokenizer.json. Give exactly one of --model, --vocab, --tokenizer.");
  cmd->add_option("--vocab", o->vocab_file,
                  "WordPiece vocab.txt (one token per line; lowercased, accents stripped, as "
                  "bert-base-uncased).");
  cmd->add_option("--tokenizer", o->tokenizer_file,
                  "Hugging Face tokenizers tokenizer.json with a WordPiece model.");
  cmd->add_option("--input", o->input,
                  "Data file: .tsv/.txt (split on TAB only, no quoting), .csv (RFC 4180 "
                  "quoting) or .jsonl/.json (one object per line); see --format.")
      ->required();
  cmd->add_option("--text-a-column", o->text_a_column,
                  "Column of the first text: a header name, a 0-based index (all digits), or "
                  "for JSONL a key.")
      ->required();
  cmd->add_option("--text-b-column", o->text_b_column,
                  "Column of the second text of a pair (same forms as --text-a-column); omit "
                  "for single texts.");
  cmd->add_option("--max-seq-len", o->max_seq_len,
                  "Maximum tokens per row including [CLS] and [SEP]; longer inputs are truncated "
                  "(longest first for pairs).")
      ->capture_default_str();
  cmd->add_option("--format", o->format,
                  "Input format tsv, csv or jsonl; default: from the --input extension.")
      ->check(CLI::IsMember({"tsv", "csv", "jsonl"}));
  cmd->add_flag("--no-header", o->no_header,
                "The TSV/CSV file has no header line: columns must be 0-based indices.");
  cmd->add_flag("--skip-malformed", o->skip_malformed,
                "Skip rows with too few columns (or invalid JSON lines, broken CSV quoting) and "
                "report their count on stderr, instead of stopping at the first one.");
  cmd->callback([o] { run_tokenize(*o); });
}

}  // namespace bertfit::cli
