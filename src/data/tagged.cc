// Reading tagged sentences from CoNLL and JSONL files (see tagged.h for the formats and rules).
#include "data/tagged.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "base/error.h"
#include "base/file.h"
#include "data/table.h"

namespace bertfit {
namespace {

std::string content_of(const std::string& path) {
  return path == "-" ? read_stdin() : read_file(path);
}

std::string display_name(const std::string& path) { return path == "-" ? kStdinName : path; }

// Byte offset of the first invalid UTF-8 sequence in s (overlong forms, surrogates and code
// points above U+10FFFF included), or npos.
std::size_t invalid_utf8_at(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    const int extra = (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : 0;
    if (extra == 0 || i + extra >= s.size()) return i;  // bad lead byte or truncated
    std::uint32_t cp = c & (0x7F >> (extra + 1));
    for (int k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr std::uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += extra + 1;
  }
  return std::string_view::npos;
}

void require_utf8(const std::string& path, std::int64_t line, std::string_view text) {
  if (const std::size_t at = invalid_utf8_at(text); at != std::string_view::npos) {
    throw_error(path, ":", line, ": not valid UTF-8 (byte ", at + 1,
                " of the line); re-encode the file as UTF-8");
  }
}

bool is_blank(std::string_view text) {
  return text.find_first_not_of(" \t") == std::string_view::npos;
}

std::vector<std::string_view> split_columns(std::string_view text) {
  std::vector<std::string_view> columns;
  std::size_t pos = 0;
  while (true) {
    pos = text.find_first_not_of(" \t", pos);
    if (pos == std::string_view::npos) break;
    std::size_t end = text.find_first_of(" \t", pos);
    if (end == std::string_view::npos) end = text.size();
    columns.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return columns;
}

void collect_tag_names(LoadedTagged& data) {
  std::set<std::string> names;
  for (const TaggedSentence& s : data.sentences) names.insert(s.tags.begin(), s.tags.end());
  data.tag_names.assign(names.begin(), names.end());  // std::set orders bytewise
}

std::string json_keys(const nlohmann::json& object) {
  std::string out;
  for (auto it = object.begin(); it != object.end(); ++it) {
    out += cat(out.empty() ? "" : ", ", "'", it.key(), "'");
  }
  return out.empty() ? "(none)" : out;
}

// The list under key of a JSONL object, or an error naming FILE:LINE.
const nlohmann::json& list_at(const nlohmann::json& object, const std::string& key,
                              const std::string& path, std::int64_t line) {
  auto it = object.find(key);
  if (it == object.end()) {
    throw_error(path, ":", line, ": no key '", key, "' (keys on this line: ", json_keys(object),
                ")");
  }
  if (!it->is_array()) {
    throw_error(path, ":", line, ": key '", key, "' holds a JSON ", it->type_name(),
                "; expected a list");
  }
  return *it;
}

std::string tag_of(const nlohmann::json& item, std::size_t k,
                   const std::vector<std::string>& id2label, const std::string& tags_column,
                   const std::string& path, std::int64_t line) {
  const std::string where = cat(path, ":", line, ": tag ", k + 1, " of '", tags_column, "'");
  if (item.is_string()) {
    std::string tag = item.get<std::string>();
    if (tag.empty()) throw_error(where, " is an empty string");
    return tag;
  }
  if (!item.is_number_integer()) {
    throw_error(where, " is a JSON ", item.type_name(), "; expected a string or an integer id");
  }
  if (id2label.empty()) {
    throw_error(where, " is the integer ", item.dump(),
                ", but there is no id2label to name it (the model's config.json has no label "
                "names); write the tags as strings");
  }
  const bool in_range = item.is_number_unsigned() && item.get<std::uint64_t>() < id2label.size();
  if (!in_range) {
    throw_error(where, " is the integer ", item.dump(), ", outside the model's id2label [0, ",
                id2label.size(), ")");
  }
  return id2label[item.get<std::size_t>()];
}

// The reason of an error thrown as "path:line: reason" (SkippedRow's reason has no place).
std::string reason_of(const Error& e, const std::string& path, std::int64_t line) {
  const std::string where = cat(path, ":", line, ": ");
  const std::string_view what = e.what();
  return std::string(what.starts_with(where) ? what.substr(where.size()) : what);
}

// One JSONL line's sentence (errors name path:line).
TaggedSentence jsonl_sentence(std::string_view text, const std::string& path, std::int64_t line,
                              const std::string& tokens_column, const std::string& tags_column,
                              const std::vector<std::string>& id2label) {
  require_utf8(path, line, text);
  const nlohmann::json object = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) throw_error(path, ":", line, ": invalid JSON");
  if (!object.is_object()) {
    throw_error(path, ":", line, ": expected a JSON object, got ", object.type_name());
  }
  TaggedSentence sentence;
  sentence.line = line;
  const nlohmann::json& words = list_at(object, tokens_column, path, line);
  for (std::size_t k = 0; k < words.size(); ++k) {
    if (!words[k].is_string()) {
      throw_error(path, ":", line, ": word ", k + 1, " of '", tokens_column, "' is a JSON ",
                  words[k].type_name(), "; expected strings");
    }
    sentence.words.push_back(words[k].get<std::string>());
  }
  if (!tags_column.empty()) {
    const nlohmann::json& tags = list_at(object, tags_column, path, line);
    if (tags.size() != words.size()) {
      throw_error(path, ":", line, ": '", tokens_column, "' holds ", words.size(), " word(s) but '",
                  tags_column, "' holds ", tags.size(), " tag(s); every word needs one tag");
    }
    for (std::size_t k = 0; k < tags.size(); ++k) {
      sentence.tags.push_back(tag_of(tags[k], k, id2label, tags_column, path, line));
    }
  }
  return sentence;
}

}  // namespace

bool is_conll_path(const std::string& path) {
  return path.size() >= 6 && path.compare(path.size() - 6, 6, ".conll") == 0;
}

LoadedTagged parse_conll(std::string_view content, const std::string& path, bool with_tags,
                         bool skip_malformed) {
  LoadedTagged data;
  data.path = path;
  data.one_word_per_line = true;
  TaggedSentence current;
  std::optional<SkippedRow> bad;  // the current sentence's first error (skip_malformed)
  std::int64_t row = 0;
  auto finish = [&] {
    if (bad) {
      bad->row = row++;
      data.skipped.push_back(std::move(*bad));
    } else if (!current.words.empty()) {
      current.row = row++;
      data.sentences.push_back(std::move(current));
    }
    current = TaggedSentence{};
    bad.reset();
  };
  for_each_line(strip_bom(content), [&](std::int64_t line, std::string_view text) {
    if (is_blank(text) || text.starts_with("-DOCSTART-")) return finish();
    if (current.words.empty() && !bad) current.line = line;
    if (bad) return;  // the rest of a skipped sentence
    try {
      require_utf8(path, line, text);
      const std::vector<std::string_view> columns = split_columns(text);
      if (with_tags && columns.size() < 2) {
        throw_error(path, ":", line, ": the word '", columns[0],
                    "' has no tag (expected the word, then its tag in the last column, "
                    "separated by spaces or TABs; a blank line between sentences)");
      }
      current.words.emplace_back(columns.front());
      if (with_tags) current.tags.emplace_back(columns.back());
    } catch (const Error& e) {
      if (!skip_malformed) throw;
      bad = SkippedRow{0, line, reason_of(e, path, line)};
    }
  });
  finish();
  if (data.sentences.empty()) {
    throw_error(path, " has no sentences (it is empty or holds only blank and -DOCSTART- lines)");
  }
  collect_tag_names(data);
  return data;
}

LoadedTagged read_conll(const std::string& path, bool with_tags, bool skip_malformed) {
  return parse_conll(content_of(path), display_name(path), with_tags, skip_malformed);
}

LoadedTagged parse_tagged_jsonl(std::string_view content, const std::string& path,
                                const std::string& tokens_column, const std::string& tags_column,
                                const std::vector<std::string>& id2label, bool skip_malformed) {
  LoadedTagged data;
  data.path = path;
  std::int64_t row = 0;
  for_each_line(strip_bom(content), [&](std::int64_t line, std::string_view text) {
    if (is_blank(text)) return;
    try {
      data.sentences.push_back(
          jsonl_sentence(text, path, line, tokens_column, tags_column, id2label));
      data.sentences.back().row = row++;
    } catch (const Error& e) {
      if (!skip_malformed) throw;
      data.skipped.push_back({row++, line, reason_of(e, path, line)});
    }
  });
  if (data.sentences.empty()) {
    throw_error(path, " has no sentences (it is empty or holds only blank lines)");
  }
  collect_tag_names(data);
  return data;
}

LoadedTagged read_tagged_jsonl(const std::string& path, const std::string& tokens_column,
                               const std::string& tags_column,
                               const std::vector<std::string>& id2label, bool skip_malformed) {
  return parse_tagged_jsonl(content_of(path), display_name(path), tokens_column, tags_column,
                            id2label, skip_malformed);
}

std::int64_t count_words(const LoadedTagged& data) {
  std::int64_t n = 0;
  for (const TaggedSentence& s : data.sentences) n += static_cast<std::int64_t>(s.words.size());
  return n;
}

}  // namespace bertfit
