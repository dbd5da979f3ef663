// `bertfit tokenize`: encodes one column (or a pair of columns) of a TSV/CSV/JSONL file with the
// model's tokenizer (WordPiece, byte-level BPE or SentencePiece) and prints one JSON line per row:
//   {"input_ids":[...],"token_type_ids":[...],"attention_mask":[...]}
// without padding, truncated to --max-seq-len. Useful to compare against HF tokenizers.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "apps/bertfit/cli_flags.h"
#include "apps/bertfit/commands.h"
#include "apps/bertfit/model_source.h"
#include "base/error.h"
#include "base/log.h"
#include "data/batch.h"
#include "data/table.h"
#include "flags/groups.h"
#include "tokenizer/tokenizer.h"

namespace bertfit::cli {
namespace {

struct TokenizeOptions {
  std::string model_dir, revision = "main";
  std::string vocab_file;
  std::string tokenizer_file;
  std::string input;
  DataOptions data;  // the text columns, --no-header, --skip-malformed
  int max_seq_len = 512;
};

std::unique_ptr<Tokenizer> load_tokenizer(const TokenizeOptions& o) {
  int given = !o.model_dir.empty() + !o.vocab_file.empty() + !o.tokenizer_file.empty();
  if (given != 1) {
    throw_error("tokenize: give exactly one of --model, --vocab and --tokenizer (got ", given, ")");
  }
  if (!o.model_dir.empty()) {
    return bertfit::load_tokenizer(resolve_model_flag(o.model_dir, o.revision));
  }
  if (!o.vocab_file.empty()) return load_tokenizer_file(o.vocab_file);
  return load_tokenizer_file(o.tokenizer_file);
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
  const DataOptions& d = o.data;
  const bool pair = !d.text_b_column.empty();
  const int min_len = pair ? 3 : 2;  // [CLS] a [SEP] (b [SEP])
  if (o.max_seq_len < min_len) {
    throw_error("--max-seq-len must be at least ", min_len, " (room for [CLS] and [SEP]",
                pair ? " and the second [SEP] of a pair" : "", "), got ", o.max_seq_len);
  }
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(o);
  if (o.max_seq_len < tokenizer->num_special_tokens(pair)) {
    throw_error("--max-seq-len must be at least ", tokenizer->num_special_tokens(pair), " for ",
                pair ? "a pair" : "a text", " with this tokenizer's template, got ", o.max_seq_len);
  }

  std::vector<std::string> columns = {d.text_a_column};
  if (pair) columns.push_back(d.text_b_column);
  TableOptions table_options;
  table_options.format = d.format;
  table_options.header = !d.no_header;
  table_options.skip_malformed = d.skip_malformed;
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
  std::vector<EncodedExample> encoded = encode_examples(*tokenizer, examples, o.max_seq_len);

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
      "([CLS] a [SEP] (b [SEP]), no padding, truncated longest-first to --max-seq-len). The "
      "tokenizer comes from exactly one of --model (its vocab.txt, with do_lower_case from "
      "tokenizer_config.json; vocab.json + merges.txt; sentencepiece.bpe.model; DeBERTa's "
      "spm.model; or else its tokenizer.json, first for a PreTrainedTokenizerFast or ModernBERT "
      "folder), --vocab and --tokenizer. RoBERTa-style tokenizers frame texts as <s> a </s> "
      "(</s> b </s>); DeBERTa's as [CLS] a [SEP] (b [SEP]) with its own ids; a byte-level BPE "
      "tokenizer.json with a TemplateProcessing post-processor (ModernBERT's) as its template "
      "says ([CLS] a [SEP] (b [SEP]), token types 0).");
  add_flags(*cmd, model_flags(o->model_dir, o->revision));
  add_flags(
      *cmd,
      {{"--vocab",
        "WordPiece vocab.txt (one token per line; lowercased, accents stripped, as "
        "bert-base-uncased)",
        &o->vocab_file},
       {"--tokenizer",
        "Hugging Face tokenizers tokenizer.json (WordPiece; BPE with a ByteLevel "
        "pre-tokenizer: RoBERTa's, or with a TemplateProcessing post-processor read as the "
        "tokenizers library runs it, ModernBERT's; Unigram or BPE with Metaspace, as converted "
        "from SentencePiece) or a "
        "SentencePiece .model (XLM-R ids; a file named spm.model: DeBERTa's ids and template)",
        &o->tokenizer_file},
       {"--input",
        "Data file: .tsv/.txt (split on TAB only, no quoting), .csv (RFC 4180 quoting) or "
        ".jsonl/.json (one object per line); '-': standard input (with --format)",
        &o->input}});
  add_flags(*cmd,
            select_flags(data_flags(o->data), {"--text-a-column", "--text-b-column", "--no-header",
                                               "--skip-malformed", "--format"}));
  // Not the compute group's --max-seq-len: tokenize's default is 512, the largest BERT input.
  add_flags(*cmd, {{"--max-seq-len",
                    "Maximum tokens per row including [CLS] and [SEP]; longer inputs are truncated "
                    "(longest first for pairs)",
                    &o->max_seq_len}});
  cmd->get_option("--input")->required();
  cmd->get_option("--text-a-column")->required();
  cmd->callback([o] { run_tokenize(*o); });
}

}  // namespace bertfit::cli
