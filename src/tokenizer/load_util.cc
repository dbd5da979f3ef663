// Helpers shared by the tokenizer file readers (see load_util.h).
#include "tokenizer/load_util.h"

#include <algorithm>

#include "base/error.h"
#include "base/file.h"
#include "tokenizer/normalizer.h"

namespace bertfit::tokenizer_detail {

using Json = nlohmann::json;

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    if (*p < 0x80) {
      ++p;
      continue;
    }
    const auto* before = p;
    if (decode_utf8(p, end) == 0xFFFD && p == before + 1) return false;
  }
  return true;
}

Json parse_json_file(const std::string& path) {
  const std::string text = read_file(path);
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    throw_error(path, ": invalid JSON: ", e.what());
  }
}

std::optional<bool> optional_bool(const Json& obj, const char* key, const std::string& path) {
  if (!obj.contains(key) || obj[key].is_null()) return std::nullopt;
  if (!obj[key].is_boolean()) throw_error(path, ": \"", key, "\" must be true, false or null");
  return obj[key].get<bool>();
}

Json optional_json_object(const std::string& path) {
  if (!path_exists(path)) return Json::object();
  Json j = parse_json_file(path);
  if (!j.is_object()) throw_error(path, ": expected a JSON object");
  return j;
}

namespace {

// Applies obj[key] (a string or an AddedToken object) to t; plain_string: a string value makes
// the token plain, else it keeps t's flags.
void apply_token(const Json& obj, const char* key, const std::string& path, bool plain_string,
                 ResolvedToken& t) {
  if (!obj.contains(key) || obj[key].is_null()) return;
  const Json& v = obj[key];
  if (v.is_string()) {
    t.content = v.get<std::string>();
    if (plain_string) t.lstrip = t.rstrip = true;
  } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    t.content = v["content"].get<std::string>();
    t.lstrip = optional_bool(v, "lstrip", path).value_or(false);
    t.rstrip = optional_bool(v, "rstrip", path).value_or(false);
  } else {
    throw_error(path, ": \"", key, "\" must be a string or an object with a \"content\" string");
  }
  if (t.content.empty()) throw_error(path, ": \"", key, "\" is empty");
}

}  // namespace

ResolvedToken resolve_special_token(const SpecialTokenRule& rule, const Json& config,
                                    const std::string& config_path, const Json& special_map,
                                    const std::string& special_map_path) {
  ResolvedToken t{rule.fallback, rule.wrapped ? rule.wrap_lstrip : true, !rule.wrapped};
  apply_token(config, rule.key, config_path, !rule.wrapped, t);
  apply_token(special_map, rule.key, special_map_path, true, t);
  return t;
}

std::vector<std::pair<std::string, std::int32_t>> read_added_tokens_json(const std::string& path,
                                                                         std::int64_t limit) {
  std::vector<std::pair<std::string, std::int32_t>> out;
  if (!path_exists(path)) return out;
  const Json j = parse_json_file(path);
  if (!j.is_object()) throw_error(path, ": expected an object of token -> id");
  for (const auto& [token, id] : j.items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() >= limit) {
      throw_error(path, ": token \"", token, "\" has id ", id.dump(),
                  "; ids must be integers in [0, ", limit, ")");
    }
    if (token.empty()) throw_error(path, ": an added token is empty");
    out.emplace_back(token, static_cast<std::int32_t>(id.get<std::int64_t>()));
  }
  std::sort(out.begin(), out.end(),
            [](const auto& x, const auto& y) { return x.second < y.second; });
  return out;
}

}  // namespace bertfit::tokenizer_detail
