// Readers of byte-level BPE files: vocab.json, merges.txt, tokenizer.json (model BPE with a
// ByteLevel pre-tokenizer) and the special tokens and add_prefix_space of tokenizer_config.json.
// Every error is one line naming the file (and the key or line).
#include <iterator>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "tokenizer/bpe.h"
#include "tokenizer/load_util.h"

namespace bertfit {

using Json = nlohmann::json;
using tokenizer_detail::AddedToken;
using tokenizer_detail::parse_json_file;

namespace {

// token -> id from a JSON object; ids must be integers in [0, 2 * count + 1024) (so that the
// id -> token table stays proportional to the vocabulary), each given once.
std::unordered_map<std::string, std::int32_t> read_vocab_object(const Json& obj,
                                                                const std::string& where) {
  if (!obj.is_object()) throw_error(where, " must be an object of token -> id");
  if (obj.empty()) throw_error(where, " is empty");
  const std::int64_t limit = 2 * static_cast<std::int64_t>(obj.size()) + 1024;
  std::unordered_map<std::string, std::int32_t> vocab;
  std::unordered_map<std::int32_t, std::string> seen;
  for (const auto& [token, id] : obj.items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() >= limit) {
      throw_error(where, ": token \"", token, "\" has id ", id.dump(),
                  "; ids must be integers in [0, ", limit, ")");
    }
    const auto i = static_cast<std::int32_t>(id.get<std::int64_t>());
    if (const auto [it, fresh] = seen.try_emplace(i, token); !fresh) {
      throw_error(where, ": id ", i, " is given to both \"", it->second, "\" and \"", token, "\"");
    }
    vocab.emplace(token, i);
  }
  return vocab;
}

bool is_ascii_space(char c) { return (c >= 9 && c <= 13) || (c >= 28 && c <= 32); }

// merges.txt as RobertaTokenizer reads it: text-mode newlines, read().split("\n")[1:-1] (the
// version line and whatever follows the last line break are skipped), each line split at
// whitespace; a pair's rank is its line's index. Lines other than "a b" are refused, except
// empty ones.
std::vector<std::pair<std::string, std::string>> read_merges_txt(const std::string& path) {
  std::string data = read_file(path);
  std::vector<std::string_view> lines;
  std::string text;
  text.reserve(data.size());
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] == '\r') {
      text.push_back('\n');
      if (i + 1 < data.size() && data[i + 1] == '\n') ++i;
    } else {
      text.push_back(data[i]);
    }
  }
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') {
      lines.emplace_back(text.data() + start, i - start);
      start = i + 1;
    }
  }
  if (lines.empty())
    throw_error(path, ": no merges (the file needs a version line, then one pair a line)");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(lines.size() - 1);
  for (std::size_t l = 1; l < lines.size(); ++l) {
    std::vector<std::string_view> parts;
    const std::string_view line = lines[l];
    for (std::size_t i = 0; i < line.size();) {
      while (i < line.size() && is_ascii_space(line[i])) ++i;
      const std::size_t b = i;
      while (i < line.size() && !is_ascii_space(line[i])) ++i;
      if (i > b) parts.push_back(line.substr(b, i - b));
    }
    if (parts.empty()) {
      merges.emplace_back();  // keeps the ranks of later lines; matches nothing
      continue;
    }
    if (parts.size() != 2) {
      throw_error(path, ":", l + 1, ": expected two tokens separated by a space, got ",
                  parts.size());
    }
    merges.emplace_back(std::string(parts[0]), std::string(parts[1]));
  }
  return merges;
}

// A special token's id; a token missing from the vocabulary is added after it, as transformers
// adds special tokens it does not find.
std::int32_t special_id(ByteLevelBpeTokenizer::Model& model, const std::string& content) {
  if (const auto it = model.vocab.find(content); it != model.vocab.end()) return it->second;
  for (const auto& [id, token] : model.added) {
    if (token == content) return id;
  }
  std::int32_t next = 0;
  for (const auto& [token, id] : model.vocab) next = std::max(next, id + 1);
  for (const auto& [id, token] : model.added) next = std::max(next, id + 1);
  model.added.emplace_back(next, content);
  return next;
}

}  // namespace

// Friend of ByteLevelBpeTokenizer: fills its special ids and added tokens.
struct BpeLoader {
  // RobertaTokenizer's special tokens (resolve_special_token: __init__ wraps strings into
  // AddedToken(lstrip=False, rstrip=False), <mask> lstrip=True) and, from the slow files,
  // added_tokens.json's non-special tokens (plain: stripped on both sides), whose ids must
  // continue the vocabulary as transformers requires.
  static void specials(ByteLevelBpeTokenizer& t, ByteLevelBpeTokenizer::Model& model,
                       const std::string& config_dir, bool added_tokens_json) {
    const std::string config_path = join_path(config_dir, "tokenizer_config.json");
    const std::string map_path = join_path(config_dir, "special_tokens_map.json");
    const std::string added_path = join_path(config_dir, "added_tokens.json");
    Json config = Json::object(), special_map = Json::object();
    if (!config_dir.empty()) {
      config = tokenizer_detail::optional_json_object(config_path);
      special_map = tokenizer_detail::optional_json_object(map_path);
    }
    t.add_prefix_space_ =
        tokenizer_detail::optional_bool(config, "add_prefix_space", config_path).value_or(false);
    struct Spec {
      tokenizer_detail::SpecialTokenRule rule;
      std::int32_t* out;
    };
    std::int32_t bos = -1, eos = -1;
    const Spec specs[] = {{{"bos_token", "<s>", true, false}, &bos},
                          {{"eos_token", "</s>", true, false}, &eos},
                          {{"unk_token", "<unk>", true, false}, &t.special_.unk},
                          {{"sep_token", "</s>", true, false}, &t.special_.sep},
                          {{"pad_token", "<pad>", true, false}, &t.special_.pad},
                          {{"cls_token", "<s>", true, false}, &t.special_.cls},
                          {{"mask_token", "<mask>", true, true}, &t.special_.mask}};
    std::vector<tokenizer_detail::ResolvedToken> resolved;
    for (const Spec& s : specs) {
      resolved.push_back(tokenizer_detail::resolve_special_token(s.rule, config, config_path,
                                                                 special_map, map_path));
    }
    if (added_tokens_json && !config_dir.empty()) {
      std::int32_t next = 0;
      for (const auto& [token, id] : model.vocab) next = std::max(next, id + 1);
      for (const auto& [id, token] : model.added) next = std::max(next, id + 1);
      std::int32_t assigned = next;  // ids go to the tokens actually added, in order
      for (const auto& [token, id] : tokenizer_detail::read_added_tokens_json(
               added_path, 2 * static_cast<std::int64_t>(model.vocab.size()) + 1024)) {
        bool special = false;
        for (const auto& r : resolved) special = special || r.content == token;
        if (special) continue;
        if (id != next) {
          throw_error(added_path, ": token \"", token, "\" has id ", id, "; the next id is ", next,
                      " (added tokens continue the vocabulary)");
        }
        ++next;
        // add_tokens adds only tokens that convert to the unknown id (not in the vocabulary).
        if (model.vocab.contains(token)) continue;
        model.added.emplace_back(assigned, token);
        t.added_.add({token, assigned, true, true});
        ++assigned;
      }
    }
    for (std::size_t i = 0; i < std::size(specs); ++i) {
      const std::int32_t id = special_id(model, resolved[i].content);
      *specs[i].out = id;
      t.added_.add({resolved[i].content, id, resolved[i].lstrip, resolved[i].rstrip});
    }
    t.extra_special_ids_ = {bos, eos};
  }
};

std::unique_ptr<ByteLevelBpeTokenizer> ByteLevelBpeTokenizer::from_files(
    const std::string& vocab_path, const std::string& merges_path, const std::string& config_dir) {
  if (!path_exists(vocab_path)) throw_error(vocab_path, ": file not found");
  if (!path_exists(merges_path)) throw_error(merges_path, ": file not found");
  std::unique_ptr<ByteLevelBpeTokenizer> t(new ByteLevelBpeTokenizer());
  Model model;
  model.vocab = read_vocab_object(parse_json_file(vocab_path), vocab_path);
  model.merges = read_merges_txt(merges_path);
  BpeLoader::specials(*t, model, config_dir, true);
  t->build(std::move(model), vocab_path);
  t->source_files_ = {vocab_path, merges_path};
  return t;
}

std::unique_ptr<ByteLevelBpeTokenizer> ByteLevelBpeTokenizer::from_tokenizer_json(
    const std::string& path, const std::string& config_dir) {
  const Json j = parse_json_file(path);
  std::unique_ptr<ByteLevelBpeTokenizer> t(new ByteLevelBpeTokenizer());
  Model model;
  try {
    if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) {
      throw_error(path, ": no \"model\" object");
    }
    const Json& m = j["model"];
    if (m.contains("type") && m["type"] != "BPE") {
      throw_error(path, ": model.type is ", m["type"].dump(), ", not BPE");
    }
    const Json pre = j.value("pre_tokenizer", Json());
    if (!pre.is_object() || pre.value("type", std::string()) != "ByteLevel") {
      throw_error(path, ": pre_tokenizer ",
                  pre.is_object() ? pre.value("type", Json()).dump() : pre.dump(),
                  " is not supported with a BPE model (only ByteLevel)");
    }
    if (!pre.value("use_regex", true)) {
      throw_error(path, ": pre_tokenizer.use_regex false is not supported");
    }
    if (!j.value("normalizer", Json()).is_null()) {
      throw_error(path, ": normalizer ", j["normalizer"].value("type", Json()).dump(),
                  " is not supported with a byte-level BPE model (only null)");
    }
    if (!m.contains("vocab")) throw_error(path, ": model.vocab is missing");
    model.vocab = read_vocab_object(m["vocab"], path + ": model.vocab");
    if (!m.contains("merges") || !m["merges"].is_array()) {
      throw_error(path, ": model.merges is missing or not an array");
    }
    for (std::size_t i = 0; i < m["merges"].size(); ++i) {
      const Json& merge = m["merges"][i];
      if (merge.is_string()) {
        const std::string s = merge.get<std::string>();
        const std::size_t space = s.find(' ');
        if (space == std::string::npos || space == 0 || space + 1 >= s.size() ||
            s.find(' ', space + 1) != std::string::npos) {
          throw_error(path, ": model.merges[", i, "] is not \"a b\"");
        }
        model.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
      } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
                 merge[1].is_string()) {
        model.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
      } else {
        throw_error(path, ": model.merges[", i, "] is neither \"a b\" nor [\"a\", \"b\"]");
      }
    }
    std::vector<AddedToken> added;
    if (j.contains("added_tokens")) {
      if (!j["added_tokens"].is_array()) throw_error(path, ": added_tokens is not an array");
      for (std::size_t i = 0; i < j["added_tokens"].size(); ++i) {
        const Json& a = j["added_tokens"][i];
        if (!a.is_object() || !a.contains("content") || !a["content"].is_string() ||
            !a.contains("id") || !a["id"].is_number_integer() || a["id"].get<std::int64_t>() < 0 ||
            a["id"].get<std::int64_t>() >=
                2 * static_cast<std::int64_t>(model.vocab.size()) + 1024) {
          throw_error(path, ": added_tokens[", i,
                      "] needs a \"content\" string and an \"id\" in range");
        }
        AddedToken token{a["content"].get<std::string>(),
                         static_cast<std::int32_t>(a["id"].get<std::int64_t>()),
                         a.value("lstrip", false), a.value("rstrip", false)};
        if (!model.vocab.contains(token.content)) model.added.emplace_back(token.id, token.content);
        added.push_back(std::move(token));
      }
    }
    BpeLoader::specials(*t, model, config_dir, false);
    for (const AddedToken& a : added) t->added_.add(a);
  } catch (const Json::exception& e) {
    throw_error(path, ": unexpected content: ", e.what());
  }
  t->build(std::move(model), path);
  t->source_files_ = {path};
  return t;
}

}  // namespace bertfit
