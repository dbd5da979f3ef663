// bertfit: fine-tune and run BERT-family text encoders on CPUs. This file only parses the
// command line with the app of app.h (after applying a --config tuned.json: tuned_config.h) and
// turns user errors into one-line messages with a non-zero exit. Under an MPI launcher, errors
// every rank meets alike (the command line's, and JobError) are printed by rank 0 only.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "apps/bertfit/app.h"
#include "apps/bertfit/tuned_config.h"
#include "base/error.h"
#include "comm/communicator.h"

namespace {

// False on ranks other than 0 of an MPI launch: rank 0 reports what every rank meets alike.
bool reports_job_errors() { return bertfit::detect_launch().rank <= 0; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app;
  bertfit::cli::build_app(app);
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty()) {
    const std::string unknown = bertfit::cli::unknown_command_message(app, args.front());
    if (!unknown.empty()) {
      if (reports_job_errors()) std::fprintf(stderr, "bertfit: error: %s\n", unknown.c_str());
      return 1;
    }
  }
  bertfit::cli::TunedArgs tuned;
  tuned.args = args;
  try {
    tuned = bertfit::cli::apply_tuned_config(app, argv);
    std::vector<char*> words{argv[0]};
    for (std::string& a : tuned.args) words.push_back(a.data());
    app.parse(static_cast<int>(words.size()), words.data());
  } catch (const CLI::ExtrasError& e) {
    // The message may end in a question ("did you mean ...?"): then no semicolon after it.
    const std::string message = bertfit::cli::unused_arguments_message(app, tuned.args);
    if (reports_job_errors()) {
      std::fprintf(stderr, "bertfit: error: %s%s run with --help for more information\n",
                   message.c_str(), message.ends_with('?') ? "" : ";");
    }
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    if (tuned.inserted > 0 && e.get_exit_code() != 0) {  // it may concern a flag of the file
      if (reports_job_errors()) {
        std::fprintf(stderr,
                     "bertfit: error: %s (from --config %s); run with --help for more "
                     "information\n",
                     e.what(), tuned.file.c_str());
      }
      return e.get_exit_code();
    }
    return reports_job_errors() ? app.exit(e) : e.get_exit_code();
  } catch (const bertfit::JobError& e) {
    if (reports_job_errors()) {
      std::fprintf(stderr, "bertfit: %s: %s\n", e.exit_code() > 128 ? "stopped" : "error",
                   e.what());
    }
    return e.exit_code();
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
