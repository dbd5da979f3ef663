// Helpers shared by the tokenizer file readers: JSON files and fields with errors that name the
// file and key, UTF-8 validation. Private to the tokenizer module.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace bertfit::tokenizer_detail {

// The parsed JSON of path; Error "<path>: invalid JSON: ..." otherwise.
nlohmann::json parse_json_file(const std::string& path);
// An optional boolean field; null counts as absent; Error naming path and key if not a bool.
std::optional<bool> optional_bool(const nlohmann::json& obj, const char* key,
                                  const std::string& path);
// A special token of tokenizer_config.json: a string, or an AddedToken object {"content": ...}.
struct ConfigToken {
  std::string content;
  std::optional<bool> lstrip, rstrip;  // set only by the object form
};
std::optional<ConfigToken> config_token(const nlohmann::json& obj, const char* key,
                                        const std::string& path);
bool valid_utf8(std::string_view s);

}  // namespace bertfit::tokenizer_detail
