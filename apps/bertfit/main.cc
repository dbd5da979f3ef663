// bertfit: fine-tune and run BERT-family text encoders on CPUs. This file only parses the
// command line with the app of app.h and turns user errors into one-line messages with a
// non-zero exit.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "apps/bertfit/app.h"
#include "base/error.h"

int main(int argc, char** argv) {
  CLI::App app;
  bertfit::cli::build_app(app);
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty()) {
    const std::string unknown = bertfit::cli::unknown_command_message(app, args.front());
    if (!unknown.empty()) {
      std::fprintf(stderr, "bertfit: error: %s\n", unknown.c_str());
      return 1;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ExtrasError& e) {
    // The message may end in a question ("did you mean ...?"): then no semicolon after it.
    const std::string message = bertfit::cli::unused_arguments_message(app, args);
    std::fprintf(stderr, "bertfit: error: %s%s run with --help for more information\n",
                 message.c_str(), message.ends_with('?') ? "" : ";");
    return e.get_exit_code();
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
