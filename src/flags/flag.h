// A command-line flag as a table entry: its name, help text and the typed field it sets. Every
// command builds its flags from such tables: apps/bertfit/cli_flags.h adds a table to a CLI11
// command (parsing, the captured default and --help follow from the entry), and train saves
// and compares its options through the same tables (train/options.h). A flag that several
// commands share is declared once, in a group (flags/groups.h, train/options.h); a command takes
// the groups, or the entries of a group, it needs.
//
// A flag whose value is one of a few words (an enum, or --eval-every's epoch | end | never | N)
// is parsed into its typed field by its entry, at the command line: a wrong word is rejected
// there, naming the flag and what it accepts, and nothing deeper parses it again.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace bertfit {

// A field set from a word and kept parsed.
struct ParsedTarget {
  std::string label;                            // for --help: "{fp32,bf16}"
  std::string accepted;                         // for errors: "fp32 or bf16"
  std::function<std::string()> get;             // the value as the command line spells it
  std::function<bool(const std::string&)> set;  // parses a word into the field; false if invalid
};

using FlagTarget = std::variant<bool*, int*, std::int64_t*, std::uint64_t*, double*, std::string*,
                                std::vector<std::string>*, ParsedTarget>;

struct Flag {
  std::string name;  // "--lr"; a name without dashes is a positional argument ("mode")
  std::string help;
  FlagTarget target;
  bool affects_trajectory = false;  // train: a resumed run must have the checkpoint's value
};

using FlagTable = std::vector<Flag>;

// One accepted word of an enum flag and the value it stands for.
template <class E>
struct Choice {
  const char* word;
  E value;
};

// "{a,b,c}" and "a, b or c" for the words of a choice flag.
std::string choices_label(const std::vector<std::string>& words);
std::string choices_accepted(const std::vector<std::string>& words);

// The target of a flag that takes one of `choices`; the field's value is always one of them.
template <class E>
ParsedTarget choice_target(E& field, std::vector<Choice<E>> choices) {
  std::vector<std::string> words;
  for (const Choice<E>& c : choices) words.push_back(c.word);
  ParsedTarget t;
  t.label = choices_label(words);
  t.accepted = choices_accepted(words);
  t.get = [&field, choices] {
    for (const Choice<E>& c : choices) {
      if (c.value == field) return std::string(c.word);
    }
    return std::string();
  };
  t.set = [&field, choices](const std::string& word) {
    for (const Choice<E>& c : choices) {
      if (word == c.word) {
        field = c.value;
        return true;
      }
    }
    return false;
  };
  return t;
}

// The entries of `table` named in `names`, in the order of `names`. A name the table does not
// declare is a programming error (CHECK).
FlagTable select_flags(const FlagTable& table, std::initializer_list<std::string_view> names);

// The tables one after the other.
FlagTable join_flags(std::initializer_list<FlagTable> tables);

}  // namespace bertfit
