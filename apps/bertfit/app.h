// The bertfit command line as a CLI11 app: its description, the global flags, and the commands
// (cmd_*.cc) in the order --help lists them. main.cc parses with it; the help test walks it.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace bertfit::cli {

void build_app(CLI::App& app);

// When the first argument `word` is not a flag and names no command of `app`: "unknown command
// 'trian'; did you mean 'train'?" (the nearest command by edit distance, when it is close),
// else with the list of commands. Empty when it is a command or a flag.
std::string unknown_command_message(const CLI::App& app, const std::string& word);

// After CLI11 left arguments unused (CLI::ExtrasError): the first of them in command-line order
// `args`, a flag first: "unknown flag '--lr-scheduler-type' for 'bertfit train'" (with the
// nearest flag of that command when it is close), or "unexpected argument 'x' for ...".
std::string unused_arguments_message(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace bertfit::cli
