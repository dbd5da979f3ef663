// Flag tables as CLI11 options (see cli_flags.h).
#include "apps/bertfit/cli_flags.h"

#include <type_traits>
#include <utility>
#include <vector>

namespace bertfit::cli {
namespace {

// A word parsed by the entry: a wrong one is a CLI11 validation error ("--flag: 'x' is not ...").
void add_parsed(CLI::App& cmd, const Flag& flag, const ParsedTarget& target) {
  const std::string name = flag.name;
  auto set = [name, target](const std::string& word) {
    if (!target.set(word)) {
      throw CLI::ValidationError(name, "'" + word + "' is not " + target.accepted);
    }
  };
  cmd.add_option_function<std::string>(flag.name, set, flag.help)
      ->type_name(target.label)
      ->default_str(target.get());
}

void add_one(CLI::App& cmd, const Flag& flag) {
  std::visit(
      [&](const auto& target) {
        using T = std::decay_t<decltype(target)>;
        if constexpr (std::is_same_v<T, ParsedTarget>) {
          add_parsed(cmd, flag, target);
        } else if constexpr (std::is_same_v<T, bool*>) {
          cmd.add_flag(flag.name, *target, flag.help);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>*>) {
          cmd.add_option(flag.name, *target, flag.help);  // repeatable; empty by default
        } else {
          cmd.add_option(flag.name, *target, flag.help)->capture_default_str();
        }
      },
      flag.target);
}

}  // namespace

void add_flags(CLI::App& cmd, const FlagTable& table) {
  for (const Flag& flag : table) add_one(cmd, flag);
}

ParsedTarget family_target(const ModelFamily*& field) {
  std::vector<Choice<const ModelFamily*>> choices;
  for (const ModelFamily* f : model_families()) choices.push_back({f->model_type, f});
  return choice_target(field, std::move(choices));
}

}  // namespace bertfit::cli
