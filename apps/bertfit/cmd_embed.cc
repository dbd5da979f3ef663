// `bertfit embed`: the sentence embedding of every row of a file, from a sentence-transformers
// folder (its pooling and Normalize modules; model/st_folder.h), batched and unpadded as
// `predict` runs, in fp32, bf16 or int8: one JSON line per row {"row", "id"?, "embedding"}.
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
#include "model/head.h"
#include "model/model_io.h"
#include "task/dataset.h"
#include "task/evaluate.h"
#include "tokenizer/tokenizer.h"

namespace bertfit::cli {
namespace {

struct EmbedOptions {
  InferenceOptions model;
  DataOptions data;  // the text column, --no-header, --skip-malformed, --format
  std::string input, output, id_column, prompt_name;
  bool normalize = false;
  bool truncate = false;
  bool max_seq_len_given = false;
};

// The text a prompt puts before each input (sentence-transformers' encode(prompt_name=...)):
// --prompt-name's, else the folder's default prompt, else none.
std::string prompt_of(const EmbedOptions& o, const ModelState& state) {
  const SentenceTransformerSpec& st = *state.sentence_transformer;
  const std::string name = o.prompt_name.empty() ? st.default_prompt_name : o.prompt_name;
  if (name.empty()) return "";
  const auto it = st.prompts.find(name);
  if (it == st.prompts.end()) {
    std::string known;
    for (const auto& [key, text] : st.prompts) known += (known.empty() ? "" : ", ") + key;
    throw_error("--prompt-name ", name, ": the model's prompts are ",
                known.empty() ? std::string("none") : known,
                " (config_sentence_transformers.json)");
  }
  return it->second;
}

void run(const EmbedOptions& o) {
  const std::string& dir = o.model.model_dir;
  if (!o.model.pooling && is_directory(dir) && !path_exists(join_path(dir, "modules.json"))) {
    throw_error("--model ", dir,
                " is not a sentence-transformers folder (no modules.json); "
                "give --pooling (cls, mean, max, mean_sqrt_len, last_token) to embed with its "
                "encoder's token vectors");
  }
  InferenceModel m = load_for_inference(o.model);
  const ModelState& state = m.state;
  if (state.config.head != HeadKind::kEmbedding) {
    throw_error("--model ", o.model.model_dir, " is a ", head_kind_noun(state.config.head),
                "; `bertfit embed` needs a sentence-transformers folder (modules.json with a "
                "Pooling module), or --pooling for a plain encoder");
  }
  const DataOptions& d = o.data;
  if (d.text_a_column.empty()) throw_error("--text-a-column is required");
  ComputeOptions c = o.model.compute;
  // sentence-transformers cuts inputs at the folder's max_seq_length unless told otherwise.
  if (!o.max_seq_len_given && state.sentence_transformer->max_seq_length) {
    c.max_seq_len =
        std::min(*state.sentence_transformer->max_seq_length, state.config.max_tokens());
  }
  std::vector<std::string> specs = {d.text_a_column};
  if (!o.id_column.empty()) specs.push_back(o.id_column);
  ColumnTable table = read_columns(o.input, specs, table_options_of(d));
  warn_if_index_columns_with_header(table);
  require_rows(table);
  if (table.skipped_rows > 0) {
    log_warn(o.input, ": skipped ", table.skipped_rows, " malformed rows");
  }
  const std::string prompt = prompt_of(o, state);
  std::vector<Example> examples(table.rows.size());
  for (std::size_t i = 0; i < table.rows.size(); ++i) {
    examples[i].text_a = prompt + table.rows[i][0];
    examples[i].line = table.lines[i];
  }
  const std::vector<EncodedExample> encoded =
      encode_examples(*m.tokenizer, examples, c.max_seq_len);
  // As TEI: a row longer than the model takes is an error unless --truncate says to cut it.
  if (!o.truncate) {
    for (std::size_t i = 0; i < encoded.size(); ++i) {
      if (encoded[i].truncated_tokens == 0) continue;
      throw_error(o.input, ":", examples[i].line, ": the row is ",
                  encoded[i].ids.size() + encoded[i].truncated_tokens, " tokens, longer than the ",
                  c.max_seq_len, " the model takes (",
                  o.max_seq_len_given ? "--max-seq-len" : "max_seq_length",
                  "); --truncate cuts such rows, as sentence-transformers' encode does");
    }
  }
  report_truncation(o.input, encoded, c.max_seq_len);
  BertModel model(state.config, state.layout, m.precision);
  const int D = model_head(state.config).output_width(state.config);
  const std::vector<float> vectors = predict_logits(
      model, state.params.data(), encoded, c.batch_size, 8, nullptr, progress_reporter("embed"));
  std::vector<nlohmann::json> lines;
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    std::vector<float> v(vectors.begin() + static_cast<std::ptrdiff_t>(i) * D,
                         vectors.begin() + static_cast<std::ptrdiff_t>(i + 1) * D);
    if (o.normalize && !state.config.normalize) {
      const float n = l2_norm(v.data(), D);
      for (float& x : v) x /= n;
    }
    nlohmann::json j{{"row", table.row_numbers[i]}};
    if (!o.id_column.empty()) j["id"] = table.rows[i].back();
    j["embedding"] = std::move(v);
    lines.push_back(std::move(j));
  }
  const std::string out = in_file_order(lines, table.skipped);
  if (o.output.empty()) {
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else {
    write_file_atomic(o.output, out);
  }
}

}  // namespace

void add_embed_command(CLI::App& app) {
  auto o = std::make_shared<EmbedOptions>();
  CLI::App* cmd = app.add_subcommand(
      "embed",
      "Embed every row of a TSV/CSV/JSONL file with a sentence-transformers model (its pooling "
      "and Normalize modules): one JSON line per data row, in order, {\"row\", \"embedding\"}. "
      "A row longer than the folder's max_seq_length (or --max-seq-len) is an error naming its "
      "line unless --truncate cuts it, as TEI does. A "
      "row skipped by --skip-malformed gets a line {\"row\", \"line\", \"skipped\": why}.");
  add_inference_flags(*cmd, o->model);
  add_flags(*cmd,
            {{"--input", "Input file (.tsv, .csv or .jsonl; '-': standard input, with --format)",
              &o->input}});
  add_flags(*cmd, select_flags(data_flags(o->data),
                               {"--text-a-column", "--no-header", "--skip-malformed", "--format"}));
  add_flags(*cmd, pooling_flags(o->model.pooling));
  add_flags(
      *cmd,
      {{"--id-column", "Column copied to each output line as \"id\"", &o->id_column},
       {"--output", "Write the embeddings here (default: stdout)", &o->output},
       {"--normalize", "L2-normalize every embedding (a model with a Normalize module always does)",
        &o->normalize},
       {"--truncate",
        "Cut rows longer than the model takes (the folder's max_seq_length, or --max-seq-len) "
        "to fit, as sentence-transformers' encode does; without it such a row is an error naming "
        "its line, as TEI's truncate false",
        &o->truncate},
       {"--prompt-name",
        "Put this prompt of config_sentence_transformers.json before every input (default: "
        "the folder's default_prompt_name, if any)",
        &o->prompt_name}});
  cmd->get_option("--input")->required();
  cmd->callback([o, cmd] {
    o->max_seq_len_given = cmd->get_option("--max-seq-len")->count() > 0;
    run(*o);
  });
}

}  // namespace bertfit::cli
