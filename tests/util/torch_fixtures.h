// Checkpoints written by PyTorch itself for the checkpoint readers' tests: a python3 that
// imports torch, and tests/fixtures/make_torch_checkpoints.py run through it. Without such a
// python3 the tests that need it skip (GTEST_SKIP with kNoTorch), so CI without python3-torch
// still passes the rest. Needs BERTFIT_SOURCE_DIR defined for the test target.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

namespace bertfit::testing {

inline constexpr const char* kNoTorch =
    "no python3 that imports torch ($BERTFIT_PYTHON, /usr/bin/python3, python3); install "
    "Debian's python3-torch (scripts/setup.sh does) to check against checkpoints PyTorch writes";

// The first of $BERTFIT_PYTHON, /usr/bin/python3 (Debian's, where python3-torch installs; a
// python3 earlier on PATH, such as pyenv's, may lack it) and python3 that imports torch, or ""
// if none does. Checked once per process.
inline const std::string& python_with_torch() {
  static const std::string python = [] {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("BERTFIT_PYTHON"); env != nullptr && *env != '\0') {
      candidates.push_back(env);
    }
    candidates.push_back("/usr/bin/python3");
    candidates.push_back("python3");
    for (const std::string& c : candidates) {
      if (std::system((c + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0) return c;
    }
    return std::string();
  }();
  return python;
}

// Runs make_torch_checkpoints.py with `args` (shell words; see the script's usage); true if it
// succeeded. Its errors go to the test's stderr.
inline bool make_torch_checkpoints(const std::string& args) {
  const std::string cmd = python_with_torch() + " " + BERTFIT_SOURCE_DIR +
                          "/tests/fixtures/make_torch_checkpoints.py " + args;
  return std::system(cmd.c_str()) == 0;
}

}  // namespace bertfit::testing
