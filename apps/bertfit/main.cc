// bertfit: fine-tune and run BERT-family text encoders on CPUs. This file only assembles the
// subcommands (cmd_*.cc) and turns user errors into one-line messages with a non-zero exit.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "apps/bertfit/commands.h"
#include "base/error.h"

int main(int argc, char** argv) {
  CLI::App app{
      "bertfit: fine-tune BERT-family text encoders (DistilBERT, BERT) on CPUs and run them.\n"
      "Models are Hugging Face folders (config.json, model.safetensors, vocab.txt)."};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_version_flag("--version", "bertfit " BERTFIT_VERSION);
  // The commands, in the order --help lists them: the main job first.
  using namespace bertfit::cli;
  for (auto add : {add_train_command, add_eval_command, add_predict_command, add_tokenize_command,
                   add_init_command, add_inspect_command, add_forward_command, add_bench_command}) {
    add(app);
  }
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
