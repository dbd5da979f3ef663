// The knobs `bertfit tune` searches, each declared once (name, help, domain on this machine,
// default, which tune modes it serves, how it reaches the process), and the search space a
// mode gets from them: the knobs that apply on this machine with their values, and a note for
// each knob or value that dropped out. A Setting (knob -> value) becomes a Launch: the flags
// and environment of the process that runs it. tuned.json (tuned_file.h) and `--config`
// (apps/bertfit/tuned_config.h) read and apply the same table.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace bertfit::tune {

enum class TuneMode { kServe = 1, kInfer = 2, kTrain = 4 };
const char* mode_name(TuneMode mode);

// What this machine offers the knobs (detect(); tests build their own).
struct Machine {
  int cores = 1;                    // usable: allowed cores, capped by the cgroup quota
  bool smt = false;                 // hyper-threads share a core
  bool int8 = false, bf16 = false;  // VNNI int8 products; native bf16 products
  std::string tcmalloc, jemalloc;   // the allocators' library paths ("" when not installed)
  bool sanitized = false;           // an ASan build: a preloaded allocator would abort it
  bool mpi = false;                 // built with MPI and mpirun on PATH: training ranks
  std::string cpu;                  // /proc/cpuinfo's model name, for the record
  static Machine detect();
};

// What else a knob's domain depends on: the tuned command's own settings.
struct SpaceContext {
  int global_batch = 32;  // train: examples per optimizer step (--batch-size x --grad-accum)
  int max_tokens = 512;   // serve: the model's positions (--max-batch-tokens at least this)
};

// How a Setting reaches a process.
struct Launch {
  std::vector<std::string> flags;                        // command-line words
  std::vector<std::pair<std::string, std::string>> env;  // variables set (before exec)
  int processes = 1;  // instances of the command (infer) or training ranks (train)
  int threads = 0;    // compute threads per process (0: the process decides)
};

using Setting = std::map<std::string, std::string>;  // knob name -> value

struct Knob {
  std::string name, help;
  std::string default_value;  // what runs when the knob is not given: the baseline
  unsigned modes = 0;         // TuneMode bits
  bool ordinal = false;       // values are ordered (numbers, sizes): the optimiser may use it
  // The values on this machine in order; `note` says why values (or the whole knob) dropped.
  std::vector<std::string> (*domain)(const Machine&, const SpaceContext&, TuneMode,
                                     std::string& note) = nullptr;
  // Adds the value's flags/environment; `s` is the whole setting (some knobs depend on others).
  void (*apply)(const std::string& value, const Setting& s, const SpaceContext&,
                Launch& launch) = nullptr;
};

const std::vector<Knob>& knob_table();
const Knob* find_knob(const std::string& name);  // nullptr when unknown

// The space a mode searches: the knobs with more than one value here, in table order.
struct Space {
  TuneMode mode = TuneMode::kInfer;
  SpaceContext context;
  struct Dim {
    const Knob* knob;
    std::vector<std::string> values;
  };
  std::vector<Dim> dims;
  Setting fixed;                     // knobs held at one value (by --fix, or the only one here)
  std::vector<std::string> dropped;  // "bind: spread: 2 cores, the same as close", ...
  Setting searched_defaults;         // the searched knobs' defaults (defaults() adds `fixed`)

  long combinations() const;
  Setting defaults() const;  // every knob at its default (a --fix'ed knob at its value)
  const Dim* dim(const std::string& name) const;
  Setting complete(const Setting& s) const;  // adds the fixed knobs
};

// `fixes`: "knob=v" (holds the knob at v) or "knob=v1,v2" (restricts it), from --fix; an unknown
// knob, a knob of another mode or a value outside the domain here is an Error naming --fix.
Space build_space(TuneMode mode, const Machine& machine, const SpaceContext& context,
                  const std::vector<std::string>& fixes);

// The process of a Setting (knobs in table order). The environment knobs at their defaults
// add nothing (the process starts as without tune); the flag knobs always add their flag.
Launch launch_of(const Setting& s, const SpaceContext& context);

// "threads=2 wait=active ..." (table order), and the shell words that run it:
// `OMP_WAIT_POLICY=active bertfit serve --threads 2 ...`.
std::string describe(const Setting& s);
std::string command_line(const Launch& launch, const std::string& command_words);

// Checks a value against the knob's domain on this machine; "" or the one-line reason.
std::string check_value(const Knob& knob, const std::string& value, const Machine& machine,
                        const SpaceContext& context);

}  // namespace bertfit::tune
