// Runs the bertfit binary under mpirun for the data-parallel tests. BERTFIT_MPIRUN (mpirun and
// its flags, without -np) is defined by the test's CMake target.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "../cli/cli_util.h"

namespace bertfit::testing {

// `mpirun [launcher_flags] -np N bertfit <args>` with stdin from /dev/null.
inline RunResult run_mpi(int np, const std::string& args, const std::string& launcher_flags = "") {
  TempDir tmp;
  const std::string cmd = std::string(BERTFIT_MPIRUN) + " " + launcher_flags + " -np " +
                          std::to_string(np) + " " + bertfit_binary() + " " + args +
                          " </dev/null >" + (tmp / "out") + " 2>" + (tmp / "err");
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(tmp / "out");
  r.err = read_text(tmp / "err");
  return r;
}

}  // namespace bertfit::testing
