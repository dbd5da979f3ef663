// bertfit: fine-tune and run BERT-family text encoders on CPUs. This file only assembles the
// subcommands (cmd_*.cc) and turns user errors into one-line messages with a non-zero exit.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>

#include "apps/bertfit/commands.h"
#include "base/error.h"

namespace bertfit::cli {
std::vector<Command>& command_registry() {
  static std::vector<Command> registry;
  return registry;
}
}  // namespace bertfit::cli

int main(int argc, char** argv) {
  CLI::App app{
      "bertfit: fine-tune BERT-family text encoders (DistilBERT, BERT) on CPUs and run them.\n"
      "Models are Hugging Face folders (config.json, model.safetensors, vocab.txt)."};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_version_flag("--version", "bertfit " BERTFIT_VERSION);
  auto& registry = bertfit::cli::command_registry();
  std::sort(registry.begin(), registry.end(),
            [](const auto& a, const auto& b) { return a.order < b.order; });
  for (auto& command : registry) command.setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const bertfit::Error& e) {
    std::fprintf(stderr, "bertfit: %s: %s\n", e.exit_code() > 128 ? "stopped" : "error", e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "bertfit: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bertfit: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
