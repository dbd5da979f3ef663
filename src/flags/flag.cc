// Helpers of the flag tables (see flag.h).
#include "flags/flag.h"

#include <algorithm>

#include "base/check.h"

namespace bertfit {

std::string choices_label(const std::vector<std::string>& words) {
  std::string out = "{";
  for (std::size_t i = 0; i < words.size(); ++i) out += (i ? "," : "") + words[i];
  return out + "}";
}

std::string choices_accepted(const std::vector<std::string>& words) {
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? " or " : ", ";
    out += words[i];
  }
  return out;
}

FlagTable select_flags(const FlagTable& table, std::initializer_list<std::string_view> names) {
  FlagTable out;
  for (std::string_view name : names) {
    auto it =
        std::find_if(table.begin(), table.end(), [&](const Flag& f) { return f.name == name; });
    CHECK(it != table.end(), "no flag ", name, " in the table");
    out.push_back(*it);
  }
  return out;
}

FlagTable join_flags(std::initializer_list<FlagTable> tables) {
  FlagTable out;
  for (const FlagTable& t : tables) out.insert(out.end(), t.begin(), t.end());
  return out;
}

}  // namespace bertfit
