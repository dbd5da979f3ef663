// Loading a WordPiece tokenizer from vocab.txt (+ tokenizer_config.json), from a Hugging Face
// tokenizers tokenizer.json, or from a model folder holding either. Every error names the file.
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "base/error.h"
#include "base/file.h"
#include "tokenizer/load_util.h"
#include "tokenizer/wordpiece.h"

namespace bertfit {
namespace {

using Json = nlohmann::json;
using tokenizer_detail::optional_bool;
using tokenizer_detail::parse_json_file;
using tokenizer_detail::valid_utf8;

// Lines as Python's text-mode readlines() + rstrip("\n") gives them: "\n", "\r\n" and "\r"
// all end a line; a last line without a line break counts, an empty tail does not.
std::vector<std::string> read_vocab_lines(const std::string& path) {
  const std::string data = read_file(path);
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] != '\n' && data[i] != '\r') continue;
    lines.emplace_back(data, start, i - start);
    if (data[i] == '\r' && i + 1 < data.size() && data[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < data.size()) lines.emplace_back(data, start, std::string::npos);
  if (lines.empty()) throw_error(path, ": the vocabulary file is empty");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!valid_utf8(lines[i])) throw_error(path, ":", i + 1, ": the token is not valid UTF-8");
  }
  return lines;
}

}  // namespace

WordPieceTokenizer WordPieceTokenizer::build(std::vector<std::string> vocab, const Options& options,
                                             const std::string& source) {
  if (vocab.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw_error(source, ": too many tokens (", vocab.size(), ")");
  }
  WordPieceTokenizer t;
  t.vocab_ = std::move(vocab);
  t.index_.build(t.vocab_, options.continuation_prefix);
  t.lowercase_ = options.lowercase;
  t.strip_accents_ = options.strip_accents;
  t.max_input_chars_per_word_ = options.max_input_chars_per_word;
  auto require = [&](std::string_view name) {
    const std::int32_t id = t.index_.find(name, false);
    if (id < 0) throw_error(source, ": the vocabulary has no ", name, " token");
    return id;
  };
  t.special_.cls = require("[CLS]");
  t.special_.sep = require("[SEP]");
  t.special_.pad = require("[PAD]");
  t.special_.unk = require(options.unk_token);
  // HF converts a special token missing from the vocabulary to the unknown id.
  const std::int32_t mask = t.index_.find("[MASK]", false);
  t.special_.mask = mask >= 0 ? mask : t.special_.unk;
  t.max_id_ = static_cast<std::int32_t>(t.vocab_.size()) - 1;
  t.source_files_ = {source};
  for (int c = 0; c < 128; ++c) {
    const char ch = static_cast<char>(c);
    const std::int32_t id = t.index_.find(&ch, 1, false);
    t.ascii_punct_id_[c] = id >= 0 && t.max_input_chars_per_word_ >= 1 ? id : t.special_.unk;
  }
  return t;
}

WordPieceTokenizer WordPieceTokenizer::from_vocab_file(const std::string& path, bool lowercase) {
  Options options;
  options.lowercase = lowercase;
  options.strip_accents = lowercase;
  return build(read_vocab_lines(path), options, path);
}

WordPieceTokenizer WordPieceTokenizer::from_tokenizer_json(const std::string& path) {
  const Json j = parse_json_file(path);
  try {
    if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) {
      throw_error(path, ": no \"model\" object");
    }
    const Json& m = j["model"];
    if (m.contains("type") && m["type"] != "WordPiece") {
      throw_error(path, ": model.type is ", m["type"].dump(), "; only WordPiece is supported");
    }
    if (!m.contains("vocab") || !m["vocab"].is_object()) {
      throw_error(path, ": model.vocab (token -> id) is missing or not an object");
    }
    if (m["vocab"].empty()) throw_error(path, ": model.vocab is empty");
    Options options;
    options.unk_token = m.value("unk_token", std::string("[UNK]"));
    options.continuation_prefix = m.value("continuing_subword_prefix", std::string("##"));
    options.max_input_chars_per_word = m.value("max_input_chars_per_word", 100);
    if (options.max_input_chars_per_word < 0) {
      throw_error(path, ": model.max_input_chars_per_word must not be negative");
    }

    // id -> token; ids must be unique and, with the added tokens, reasonably dense.
    const std::size_t count = m["vocab"].size() + j.value("added_tokens", Json::array()).size();
    std::vector<std::string> vocab;
    auto place = [&](const std::string& token, const Json& id_json) {
      if (!id_json.is_number_integer() || id_json.get<std::int64_t>() < 0 ||
          id_json.get<std::int64_t>() >= static_cast<std::int64_t>(2 * count + 1024)) {
        throw_error(path, ": token \"", token, "\" has id ", id_json.dump(),
                    "; ids must be integers in [0, ", 2 * count + 1024, ")");
      }
      const auto id = static_cast<std::size_t>(id_json.get<std::int64_t>());
      if (id >= vocab.size()) vocab.resize(id + 1);
      if (!vocab[id].empty() && vocab[id] != token) {
        throw_error(path, ": id ", id, " is given to both \"", vocab[id], "\" and \"", token, "\"");
      }
      vocab[id] = token;
    };
    for (const auto& [token, id] : m["vocab"].items()) place(token, id);
    if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
      for (const Json& added : j["added_tokens"]) place(added.at("content"), added.at("id"));
    }

    const Json normalizer = j.value("normalizer", Json());
    if (normalizer.is_null()) {
      options.lowercase = options.strip_accents = false;
    } else {
      if (normalizer.value("type", std::string()) != "BertNormalizer") {
        throw_error(path, ": normalizer ", normalizer.value("type", Json()).dump(),
                    " is not supported (only BertNormalizer)");
      }
      if (!normalizer.value("clean_text", true) ||
          !normalizer.value("handle_chinese_chars", true)) {
        throw_error(path,
                    ": BertNormalizer with clean_text or handle_chinese_chars false is "
                    "not supported");
      }
      options.lowercase = optional_bool(normalizer, "lowercase", path).value_or(true);
      options.strip_accents =
          optional_bool(normalizer, "strip_accents", path).value_or(options.lowercase);
    }
    const Json pre = j.value("pre_tokenizer", Json());
    if (!pre.is_null() && pre.value("type", std::string()) != "BertPreTokenizer") {
      throw_error(path, ": pre_tokenizer ", pre.value("type", Json()).dump(),
                  " is not supported (only BertPreTokenizer)");
    }
    return build(std::move(vocab), options, path);
  } catch (const Json::exception& e) {
    throw_error(path, ": unexpected content: ", e.what());
  }
}

WordPieceTokenizer WordPieceTokenizer::from_model_dir(const std::string& dir) {
  if (!is_directory(dir)) throw_error("model folder ", dir, " does not exist or is not a folder");
  const std::string vocab_path = join_path(dir, "vocab.txt");
  if (path_exists(vocab_path)) {
    Options options;
    const std::string config_path = join_path(dir, "tokenizer_config.json");
    if (path_exists(config_path)) {
      const Json config = parse_json_file(config_path);
      if (!config.is_object()) throw_error(config_path, ": expected a JSON object");
      options.lowercase = optional_bool(config, "do_lower_case", config_path).value_or(true);
      options.strip_accents =
          optional_bool(config, "strip_accents", config_path).value_or(options.lowercase);
    }
    return build(read_vocab_lines(vocab_path), options, vocab_path);
  }
  const std::string json_path = join_path(dir, "tokenizer.json");
  if (path_exists(json_path)) return from_tokenizer_json(json_path);
  throw_error("model folder ", dir, " has neither vocab.txt nor tokenizer.json");
}

}  // namespace bertfit
