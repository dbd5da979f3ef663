// Subcommand registry for the bertfit CLI. Each cmd_<name>.cc defines its options and action
// in one place and registers itself with a static CommandRegistrar; main.cc builds the app.
#pragma once

#include <functional>
#include <vector>

namespace CLI {
class App;
}

namespace bertfit::cli {

// A subcommand: `order` fixes its place in --help; setup adds a subcommand to the app and
// attaches its callback.
struct Command {
  int order;
  std::function<void(CLI::App&)> setup;
};
std::vector<Command>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(int order, std::function<void(CLI::App&)> setup) {
    command_registry().push_back({order, std::move(setup)});
  }
};

}  // namespace bertfit::cli
