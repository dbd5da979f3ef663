// Helpers shared by the tokenizer file readers (see load_util.h).
#include "tokenizer/load_util.h"

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

std::optional<ConfigToken> config_token(const Json& obj, const char* key, const std::string& path) {
  if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return std::nullopt;
  const Json& v = obj[key];
  ConfigToken t;
  if (v.is_string()) {
    t.content = v.get<std::string>();
  } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    t.content = v["content"].get<std::string>();
    t.lstrip = optional_bool(v, "lstrip", path);
    t.rstrip = optional_bool(v, "rstrip", path);
  } else {
    throw_error(path, ": \"", key, "\" must be a string or an object with a \"content\" string");
  }
  if (t.content.empty()) throw_error(path, ": \"", key, "\" is empty");
  return t;
}

}  // namespace bertfit::tokenizer_detail
