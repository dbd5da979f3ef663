// Adds the options of an OptionSpec table (train/options.h) to a CLI11 subcommand, so that each
// option is declared once in train/ and its flag, help and default follow from there.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "train/options.h"

namespace bertfit::cli {

// Flags listed in `skip` are left out (e.g. --train-file for eval).
inline void add_option_table(CLI::App& app, const std::vector<OptionSpec>& table,
                             const std::vector<std::string>& skip = {}) {
  for (const OptionSpec& s : table) {
    if (std::find(skip.begin(), skip.end(), s.flag) != skip.end()) continue;
    std::visit(
        [&](auto* target) {
          using T = std::remove_pointer_t<decltype(target)>;
          if constexpr (std::is_same_v<T, bool>) {
            app.add_flag(s.flag, *target, s.help);
          } else {
            app.add_option(s.flag, *target, s.help)->capture_default_str();
          }
        },
        s.target);
  }
}

}  // namespace bertfit::cli
