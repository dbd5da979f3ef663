// Helpers shared by the tokenizer file readers: JSON files and fields with errors that name the
// file and key, UTF-8 validation. Private to the tokenizer module.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bertfit::tokenizer_detail {

// The parsed JSON of path; Error "<path>: invalid JSON: ..." otherwise.
nlohmann::json parse_json_file(const std::string& path);
// An optional boolean field; null counts as absent; Error naming path and key if not a bool.
std::optional<bool> optional_bool(const nlohmann::json& obj, const char* key,
                                  const std::string& path);
// The JSON object in path, or {} if there is no such file; Error if it is not an object.
nlohmann::json optional_json_object(const std::string& path);

// One special token as transformers 4.28.1's from_pretrained settles it: the tokenizer's own
// default (fallback; __init__ wraps a string into AddedToken(lstrip=wrap_lstrip, rstrip=False)
// when wrapped, else keeps it a plain string), then tokenizer_config.json's value (a string:
// the content, wrapped as __init__ does; an object: an AddedToken with its flags, false when
// absent), then special_tokens_map.json's (set on the tokenizer after __init__: a string stays
// plain; an object is an AddedToken). A plain string strips whitespace on both sides of it in
// raw text (lstrip = rstrip = true).
struct SpecialTokenRule {
  const char* key;       // "mask_token"
  const char* fallback;  // "<mask>"
  bool wrapped;
  bool wrap_lstrip;
};
struct ResolvedToken {
  std::string content;
  bool lstrip, rstrip;
};
ResolvedToken resolve_special_token(const SpecialTokenRule& rule, const nlohmann::json& config,
                                    const std::string& config_path,
                                    const nlohmann::json& special_map,
                                    const std::string& special_map_path);

// added_tokens.json ({"token": id}) sorted by id; {} if there is no such file. Error naming the
// file for anything but string -> non-negative integer below limit.
std::vector<std::pair<std::string, std::int32_t>> read_added_tokens_json(const std::string& path,
                                                                         std::int64_t limit);

bool valid_utf8(std::string_view s);

}  // namespace bertfit::tokenizer_detail
