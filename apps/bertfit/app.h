// The bertfit command line as a CLI11 app: its description, the global flags, and the commands
// (cmd_*.cc) in the order --help lists them. main.cc parses with it; the help test walks it.
#pragma once

#include <CLI/CLI.hpp>

namespace bertfit::cli {

void build_app(CLI::App& app);

}  // namespace bertfit::cli
