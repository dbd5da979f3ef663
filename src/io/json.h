// JSON reading with errors that name the file, line and column (nlohmann::json underneath).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace bertfit {

// Parses JSON text; `source` names the file in the Error thrown for invalid JSON.
nlohmann::json parse_json_text(std::string_view text, const std::string& source);
// Reads and parses a JSON file; throws Error naming the path if it is missing or invalid.
nlohmann::json read_json_file(const std::string& path);

// The key's value as the requested type, or an Error "<source>: key '<key>' must be <what>".
// Integral values must be JSON integers; floating values accept any JSON number.
int json_int(const nlohmann::json& object, const std::string& key, const std::string& source);
double json_number(const nlohmann::json& object, const std::string& key, const std::string& source);
bool json_bool(const nlohmann::json& object, const std::string& key, const std::string& source);
std::string json_string(const nlohmann::json& object, const std::string& key,
                        const std::string& source);

}  // namespace bertfit
