// JSON helpers: parsing with file/line/column in errors, typed field access with key names.
#include "io/json.h"

#include <limits>

#include "base/error.h"
#include "base/file.h"

namespace bertfit {

using nlohmann::json;

json parse_json_text(std::string_view text, const std::string& source) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line L, column C: ...".
    std::string what = e.what();
    auto pos = what.find("] ");
    throw_error(source, ": invalid JSON: ", pos == std::string::npos ? what : what.substr(pos + 2));
  }
}

json read_json_file(const std::string& path) { return parse_json_text(read_file(path), path); }

namespace {
const json& field(const json& object, const std::string& key, const std::string& source) {
  auto it = object.find(key);
  if (it == object.end()) throw_error(source, ": missing key '", key, "'");
  return *it;
}
}  // namespace

int json_int(const json& object, const std::string& key, const std::string& source) {
  const json& v = field(object, key, source);
  if (!v.is_number_integer()) {
    throw_error(source, ": key '", key, "' must be an integer, found ", v.dump());
  }
  if (v.is_number_unsigned()) {
    auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
      throw_error(source, ": key '", key, "' value ", u, " is too large");
    }
    return static_cast<int>(u);
  }
  auto i = v.get<std::int64_t>();
  if (i < std::numeric_limits<int>::min()) throw_error(source, ": key '", key, "' is too small");
  return static_cast<int>(i);
}

double json_number(const json& object, const std::string& key, const std::string& source) {
  const json& v = field(object, key, source);
  if (!v.is_number()) throw_error(source, ": key '", key, "' must be a number, found ", v.dump());
  return v.get<double>();
}

bool json_bool(const json& object, const std::string& key, const std::string& source) {
  const json& v = field(object, key, source);
  if (!v.is_boolean()) {
    throw_error(source, ": key '", key, "' must be true or false, found ", v.dump());
  }
  return v.get<bool>();
}

std::string json_string(const json& object, const std::string& key, const std::string& source) {
  const json& v = field(object, key, source);
  if (!v.is_string()) throw_error(source, ": key '", key, "' must be a string, found ", v.dump());
  return v.get<std::string>();
}

}  // namespace bertfit
