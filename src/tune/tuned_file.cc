// tuned.json (tuned_file.h): written pretty and atomically, read with every key checked. Each
// defect a reader meets is one line naming the flag and the file: not JSON (with its line and
// column), not bertfit tune's file, another version, an unknown key or knob (with the nearest
// name), a value of the wrong type or outside the knob's domain on this machine.
#include "tune/tuned_file.h"

#include <algorithm>
#include <set>

#include "base/error.h"
#include "base/file.h"
#include "base/nearest.h"

namespace bertfit::tune {
namespace {

constexpr int kVersion = 1;

const std::vector<std::string>& top_keys() {
  static const std::vector<std::string> keys = {
      "bertfit_tune", "command", "objective", "unit",       "model",       "context",
      "settings",     "machine", "measured",  "importance", "command_line"};
  return keys;
}

// "; did you mean 'x'?" for the candidate nearest `word`, or one that is a '_'-separated part
// of it ("omp_wait" -> "wait"); "" when none is close.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  std::string near = nearest(word, candidates);
  if (near.empty()) {
    const std::string padded = "_" + word + "_";
    for (const std::string& c : candidates) {
      if (padded.find("_" + c + "_") != std::string::npos) {
        near = c;
        break;
      }
    }
  }
  return near.empty() ? "" : "; did you mean '" + near + "'?";
}

// `s` as it is, or JSON-escaped when it holds control characters (a message stays one line).
std::string printable(const std::string& s) {
  const bool plain = std::none_of(s.begin(), s.end(), [](char c) { return c >= 0 && c < 0x20; });
  return plain ? s : nlohmann::json(s).dump();
}

// 1-based line and column of byte `index` of `text`.
std::string line_and_column(const std::string& text, std::size_t index) {
  index = std::min(index, text.size());
  const auto line = 1 + std::count(text.begin(), text.begin() + index, '\n');
  const std::size_t newline = index == 0 ? std::string::npos : text.rfind('\n', index - 1);
  const std::size_t column = newline == std::string::npos ? index + 1 : index - newline;
  return cat("line ", line, ", column ", column);
}

class Reader {
 public:
  Reader(std::string flag, std::string path) : prefix_(flag + " " + path + ": ") {}

  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const {
    throw_error(prefix_, args...);
  }

  std::string string_at(const nlohmann::json& j, const std::string& key) const {
    const auto it = j.find(key);
    if (it == j.end()) return "";
    if (!it->is_string()) fail("'", key, "' must be a string, not ", it->dump());
    return it->get<std::string>();
  }

  nlohmann::json object_at(const nlohmann::json& j, const std::string& key) const {
    const auto it = j.find(key);
    if (it == j.end()) return nlohmann::json::object();
    if (!it->is_object()) fail("'", key, "' must be an object, not ", it->dump());
    return *it;
  }

  int positive_at(const nlohmann::json& j, const std::string& key, int fallback) const {
    const auto it = j.find(key);
    if (it == j.end()) return fallback;
    if (!it->is_number_integer() || it->get<std::int64_t>() <= 0 ||
        it->get<std::int64_t>() > 1'000'000) {
      fail("'context.", key, "' must be a positive whole number, not ", it->dump());
    }
    return it->get<int>();
  }

 private:
  std::string prefix_;
};

}  // namespace

void write_tuned_file(const std::string& path, const TunedFile& file) {
  nlohmann::ordered_json settings = nlohmann::ordered_json::object();
  for (const Knob& k : knob_table()) {  // table order: as `describe` lists them
    if (const auto it = file.settings.find(k.name); it != file.settings.end()) {
      settings[k.name] = it->second;
    }
  }
  for (const auto& [name, value] : file.settings) {
    if (find_knob(name) == nullptr) throw_error(path, ": unknown knob '", name, "'");
  }
  const auto ordered = [](const nlohmann::json& j) {
    return nlohmann::ordered_json::parse(j.dump());
  };
  nlohmann::ordered_json j;
  j["bertfit_tune"] = kVersion;
  j["command"] = file.command;
  j["objective"] = file.objective;
  j["unit"] = file.unit;
  j["model"] = file.model;
  j["context"] = {{"global_batch", file.context.global_batch},
                  {"max_tokens", file.context.max_tokens}};
  j["settings"] = settings;
  j["machine"] = ordered(file.machine);
  j["measured"] = ordered(file.measured);
  j["importance"] = ordered(file.importance);
  j["command_line"] = file.command_line;
  write_file_atomic(path, j.dump(2) + "\n");
}

TunedFile read_tuned_file(const std::string& path, const Machine& machine,
                          const std::string& flag) {
  const Reader r(flag, path);
  std::string text;
  try {
    text = read_file(path);  // "PATH: cannot open (...)", "PATH: is a directory, ..."
  } catch (const Error& e) {
    throw_error(flag, " ", e.what());
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte counts the bytes read: the position is the last byte of the offending token.
    r.fail("not JSON (", line_and_column(text, e.byte > 0 ? e.byte - 1 : 0), ")");
  }
  if (!j.is_object() || !j.contains("bertfit_tune")) {
    r.fail("not a file written by bertfit tune (no \"bertfit_tune\" key)");
  }
  const nlohmann::json& version = j["bertfit_tune"];
  if (!version.is_number_integer()) {
    r.fail("'bertfit_tune' must be the files' version number, not ", version.dump());
  }
  if (version.get<std::int64_t>() != kVersion) {
    r.fail("version ", version.dump(), " of bertfit tune's files; this bertfit reads version ",
           kVersion);
  }
  for (const auto& [key, value] : j.items()) {
    if (std::find(top_keys().begin(), top_keys().end(), key) == top_keys().end()) {
      r.fail("unknown key '", printable(key), "'", did_you_mean(key, top_keys()));
    }
  }
  TunedFile f;
  f.command = r.string_at(j, "command");
  f.objective = r.string_at(j, "objective");
  f.unit = r.string_at(j, "unit");
  f.model = r.string_at(j, "model");
  f.command_line = r.string_at(j, "command_line");
  f.machine = r.object_at(j, "machine");
  f.measured = r.object_at(j, "measured");
  f.importance = r.object_at(j, "importance");
  const nlohmann::json context = r.object_at(j, "context");
  for (const auto& [key, value] : context.items()) {
    if (key != "global_batch" && key != "max_tokens") {
      r.fail("unknown key 'context.", printable(key), "'",
             did_you_mean(key, {"global_batch", "max_tokens"}));
    }
  }
  f.context.global_batch = r.positive_at(context, "global_batch", f.context.global_batch);
  f.context.max_tokens = r.positive_at(context, "max_tokens", f.context.max_tokens);
  if (!j.contains("settings")) r.fail("no \"settings\" key: nothing to apply");
  const nlohmann::json settings = r.object_at(j, "settings");
  std::vector<std::string> knobs;
  for (const Knob& k : knob_table()) knobs.push_back(k.name);
  for (const auto& [name, value] : settings.items()) {
    const Knob* knob = find_knob(name);
    if (knob == nullptr) r.fail("unknown knob '", printable(name), "'", did_you_mean(name, knobs));
    if (!value.is_string()) {
      const std::string shown = value.dump();
      r.fail("knob '", name, "': give the value as a string, \"",
             shown.size() > 40 ? shown.substr(0, 40) + "..." : shown, "\"");
    }
    if (printable(value.get<std::string>()) != value.get<std::string>()) {
      r.fail("knob '", name, "': ", value.dump(), " is not one of its values");
    }
    const std::string reason = check_value(*knob, value.get<std::string>(), machine, f.context);
    if (!reason.empty()) r.fail(reason);
    f.settings[name] = value.get<std::string>();
  }
  return f;
}

}  // namespace bertfit::tune
