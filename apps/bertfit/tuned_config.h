// `--config tuned.json` (serve, predict, bench, train, eval, embed): the settings `bertfit tune`
// found (tune/tuned_file.h), applied before CLI11 parses the command line. Environment knobs
// (OMP_WAIT_POLICY, OMP_PROC_BIND, OMP_PLACES, LD_PRELOAD) only act when a process starts, as
// libgomp reads them when it loads and the loader reads LD_PRELOAD at exec: when one must change,
// the binary sets them and executes itself again with the same arguments. The file's flags are
// inserted after the command word where the command line gives none of its own. A variable set in
// the user's environment and a flag on the command line win over the file.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace bertfit::cli {

struct TunedArgs {
  std::vector<std::string> args;  // argv[1..] with the file's flags inserted
  std::string file;               // the --config file; "" when none applies
  int inserted = 0;               // flags that came from the file
};

// Reads the --config of the command of `args` (argv[1..]) when that command takes a tuned.json,
// prints its notes on stderr and returns the command line to parse. May not return: it executes
// /proc/self/exe again (with `argv`) once the file's environment is set. Throws JobError for a
// defect of the file (one line naming it).
TunedArgs apply_tuned_config(const CLI::App& app, char** argv);

}  // namespace bertfit::cli
