// optuna in a Python child (Debian's python3-optuna 3.1 and python3-sklearn for
// /usr/bin/python3), spoken to in JSON lines over its stdin and stdout: start a study over the
// searched knobs, ask, tell (a setting it did not propose is enqueued first, so TPE's model
// holds every measurement), and the knobs' importance by fANOVA. The driver's Python text is
// part of this file's .cc; tune needs no file beside the binary.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tune/space.h"

namespace bertfit::tune {

class OptunaDriver {
 public:
  // Starts the child and a study (TPE with `startup` random trials first, multivariate);
  // throws Error in one line when Python or optuna is missing.
  OptunaDriver(const Space& space, bool minimize, unsigned seed, int startup);
  ~OptunaDriver();
  OptunaDriver(const OptunaDriver&) = delete;
  OptunaDriver& operator=(const OptunaDriver&) = delete;

  Setting ask();
  void tell(const Setting& s, const double* value);  // nullptr: the run failed
  nlohmann::json importance();  // knob -> share; throws Error when optuna cannot say

 private:
  nlohmann::json call(const nlohmann::json& request, double timeout_s);
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::string buffer_;
  long pending_number_ = -1;  // the trial ask() returned, not told yet
  Setting pending_;
};

// The one line that says how to get optuna (for --sampler tpe without it).
std::string optuna_missing_message();

}  // namespace bertfit::tune
