// Readers of byte-level BPE files: vocab.json, merges.txt, tokenizer.json (model BPE with a
// ByteLevel pre-tokenizer; read as RobertaTokenizer or as the tokenizers library runs it, with its
// post-processor) and the special tokens and add_prefix_space of tokenizer_config.json.
// Every error is one line naming the file (and the key or line).
#include <cstdint>
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

namespace {

// An added token of a tokenizer.json, with its "special" flag.
struct JsonAddedToken {
  AddedToken token;
  bool special = false;
};

// The model (vocab, merges) and added_tokens of a tokenizer.json with a BPE model, a ByteLevel
// pre-tokenizer (use_regex) and no normalizer; returns the pre-tokenizer.
Json read_byte_level_json(const Json& j, const std::string& path,
                          ByteLevelBpeTokenizer::Model& model, std::vector<JsonAddedToken>& added) {
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
  if (j.contains("added_tokens")) {
    if (!j["added_tokens"].is_array()) throw_error(path, ": added_tokens is not an array");
    for (std::size_t i = 0; i < j["added_tokens"].size(); ++i) {
      const Json& a = j["added_tokens"][i];
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string() ||
          !a.contains("id") || !a["id"].is_number_integer() || a["id"].get<std::int64_t>() < 0 ||
          a["id"].get<std::int64_t>() >= 2 * static_cast<std::int64_t>(model.vocab.size()) + 1024) {
        throw_error(path, ": added_tokens[", i,
                    "] needs a \"content\" string and an \"id\" in range");
      }
      AddedToken token{a["content"].get<std::string>(),
                       static_cast<std::int32_t>(a["id"].get<std::int64_t>()),
                       a.value("lstrip", false), a.value("rstrip", false)};
      if (!model.vocab.contains(token.content)) model.added.emplace_back(token.id, token.content);
      added.push_back({std::move(token), a.value("special", false)});
    }
  }
  return pre;
}

// The id of a token of the vocabulary or the added tokens, -1 if neither has it.
std::int32_t find_id(const ByteLevelBpeTokenizer::Model& model, const std::string& content) {
  if (const auto it = model.vocab.find(content); it != model.vocab.end()) return it->second;
  for (const auto& [id, token] : model.added) {
    if (token == content) return id;
  }
  return -1;
}

// The id of a special token of the post-processor ("[CLS]" or ["[CLS]", 1]).
std::int32_t processor_token_id(const Json& token, const std::string& where) {
  if (!token.is_array() || token.size() != 2 || !token[1].is_number_integer() ||
      token[1].get<std::int64_t>() < 0 || token[1].get<std::int64_t>() > INT32_MAX) {
    throw_error(where, " is not [\"token\", id]");
  }
  return static_cast<std::int32_t>(token[1].get<std::int64_t>());
}

// TemplateProcessing's single or pair: [{"SpecialToken": {"id", "type_id"}} |
// {"Sequence": {"id": "A" | "B", "type_id"}}], the special tokens' ids from special_tokens. The
// template must hold A once, and B once for a pair (never for a single text).
std::vector<TemplatePiece> read_template(const Json& processor, const char* key,
                                         const std::string& path) {
  const std::string where = cat(path, ": post_processor.", key);
  const Json pieces = processor.value(key, Json());
  const Json specials = processor.value("special_tokens", Json::object());
  if (!pieces.is_array()) throw_error(where, " is not an array of pieces");
  std::vector<TemplatePiece> out;
  int a = 0, b = 0;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const Json& p = pieces[i];
    const bool special = p.is_object() && p.contains("SpecialToken");
    const Json body = !p.is_object()           ? Json()
                      : special                ? p["SpecialToken"]
                      : p.contains("Sequence") ? p["Sequence"]
                                               : Json();
    if (!body.is_object() || !body.contains("id") || !body["id"].is_string()) {
      throw_error(where, "[", i, "] is neither {\"SpecialToken\": ...} nor {\"Sequence\": ...}");
    }
    const Json type = body.value("type_id", Json(0));
    if (!type.is_number_integer() || type.get<std::int64_t>() < 0 ||
        type.get<std::int64_t>() > 255) {
      throw_error(where, "[", i, "].type_id must be an integer in [0, 255]");
    }
    TemplatePiece piece;
    piece.type_id = static_cast<std::int32_t>(type.get<std::int64_t>());
    const std::string id = body["id"].get<std::string>();
    if (special) {
      const Json s = specials.is_object() ? specials.value(id, Json()) : Json();
      if (!s.is_object() || !s.contains("ids") || !s["ids"].is_array()) {
        throw_error(path, ": post_processor.special_tokens has no ids for \"", id, "\"");
      }
      for (const Json& v : s["ids"]) {
        if (!v.is_number_integer() || v.get<std::int64_t>() < 0 ||
            v.get<std::int64_t>() > INT32_MAX) {
          throw_error(path, ": post_processor.special_tokens[\"", id, "\"].ids must be ids");
        }
        piece.ids.push_back(static_cast<std::int32_t>(v.get<std::int64_t>()));
      }
    } else if (id == "A" || id == "B") {
      piece.sequence = id == "A" ? 0 : 1;
      ++(id == "A" ? a : b);
    } else {
      throw_error(where, "[", i, "]: a Sequence is \"A\" or \"B\", not \"", id, "\"");
    }
    out.push_back(std::move(piece));
  }
  const bool pair = std::string_view(key) == "pair";
  if (a != 1 || b != (pair ? 1 : 0)) {
    throw_error(where, " must hold the sequence A once", pair ? " and B once" : " and no B");
  }
  return out;
}

// A *_token of tokenizer_config.json (else special_tokens_map.json): its content, "" if absent.
std::string config_token(const Json& config, const Json& special_map, const char* key) {
  for (const Json* j : {&config, &special_map}) {
    const Json v = j->value(key, Json());
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      return v["content"].get<std::string>();
    }
  }
  return "";
}

}  // namespace

std::unique_ptr<ByteLevelBpeTokenizer> ByteLevelBpeTokenizer::from_tokenizer_json(
    const std::string& path, const std::string& config_dir) {
  const Json j = parse_json_file(path);
  std::unique_ptr<ByteLevelBpeTokenizer> t(new ByteLevelBpeTokenizer());
  Model model;
  std::vector<JsonAddedToken> added;
  try {
    read_byte_level_json(j, path, model, added);
    BpeLoader::specials(*t, model, config_dir, false);
    for (const JsonAddedToken& a : added) t->added_.add(a.token);
  } catch (const Json::exception& e) {
    throw_error(path, ": unexpected content: ", e.what());
  }
  t->build(std::move(model), path);
  t->source_files_ = {path};
  return t;
}

std::unique_ptr<ByteLevelBpeTokenizer> ByteLevelBpeTokenizer::from_fast_tokenizer_json(
    const std::string& path, const std::string& config_dir) {
  const Json j = parse_json_file(path);
  std::unique_ptr<ByteLevelBpeTokenizer> t(new ByteLevelBpeTokenizer());
  t->kind_ = TokenizerKind::kFastByteLevelBpe;
  t->truncation_ = PairTruncation::kHalves;
  t->added_.set_strip_into_token(true);
  Model model;
  std::vector<JsonAddedToken> added;
  try {
    const Json pre = read_byte_level_json(j, path, model, added);
    // The ByteLevel pre-tokenizer's default is a prefix space.
    t->add_prefix_space_ = pre.value("add_prefix_space", true);
    const Json decoder = j.value("decoder", Json());
    if (!decoder.is_null() && decoder.value("type", std::string()) != "ByteLevel") {
      throw_error(path, ": decoder ", decoder.value("type", Json()).dump(),
                  " is not supported with a byte-level BPE model (only ByteLevel)");
    }
    const Json post = j.value("post_processor", Json());
    const std::string post_type = post.is_object() ? post.value("type", std::string()) : "";
    if (post_type == "TemplateProcessing") {
      t->template_ = PairTemplate::kTemplate;
      t->post_template_.single = read_template(post, "single", path);
      t->post_template_.pair = read_template(post, "pair", path);
      t->trim_offsets_ = false;
    } else if (post_type == "RobertaProcessing" || post_type == "BertProcessing") {
      const bool roberta = post_type == "RobertaProcessing";
      t->template_ = roberta ? PairTemplate::kRoberta : PairTemplate::kBert;
      t->special_.cls =
          processor_token_id(post.value("cls", Json()), path + ": post_processor.cls");
      t->special_.sep =
          processor_token_id(post.value("sep", Json()), path + ": post_processor.sep");
      t->trim_offsets_ = roberta && post.value("trim_offsets", true);
    } else {
      throw_error(path, ": post_processor ",
                  post.is_object() ? post.value("type", Json()).dump() : post.dump(),
                  " is not supported (TemplateProcessing, RobertaProcessing, BertProcessing)");
    }
    for (const JsonAddedToken& a : added) {
      t->added_.add(a.token);
      if (a.special) t->extra_special_ids_.push_back(a.token.id);
    }
    // The named special tokens: the folder's settings, else what the tokenizer.json implies.
    Json config = Json::object(), special_map = Json::object();
    if (!config_dir.empty()) {
      config =
          tokenizer_detail::optional_json_object(join_path(config_dir, "tokenizer_config.json"));
      special_map =
          tokenizer_detail::optional_json_object(join_path(config_dir, "special_tokens_map.json"));
    }
    auto special_of = [&](std::vector<std::string> contents) {
      for (const std::string& c : contents) {
        for (const JsonAddedToken& a : added) {
          if (a.special && a.token.content == c) return a.token.id;
        }
      }
      return -1;
    };
    auto named = [&](const char* key, std::int32_t fallback) {
      const std::string content = config_token(config, special_map, key);
      const std::int32_t id = content.empty() ? -1 : find_id(model, content);
      return id >= 0 ? id : fallback;
    };
    std::vector<std::int32_t> template_ids;
    for (const TemplatePiece& p : t->post_template_.single) {
      template_ids.insert(template_ids.end(), p.ids.begin(), p.ids.end());
    }
    const Json unk = j["model"].value("unk_token", Json());
    t->special_.cls =
        named("cls_token", template_ids.empty() ? t->special_.cls : template_ids.front());
    t->special_.sep =
        named("sep_token", template_ids.empty() ? t->special_.sep : template_ids.back());
    const std::int32_t model_unk = unk.is_string() ? find_id(model, unk.get<std::string>()) : -1;
    t->special_.unk =
        named("unk_token", model_unk >= 0 ? model_unk : special_of({"[UNK]", "<unk>"}));
    t->special_.pad = named("pad_token", special_of({"[PAD]", "<pad>"}));
    t->special_.mask = named("mask_token", special_of({"[MASK]", "<mask>"}));
  } catch (const Json::exception& e) {
    throw_error(path, ": unexpected content: ", e.what());
  }
  t->build(std::move(model), path);
  t->source_files_ = {path};
  return t;
}

}  // namespace bertfit
