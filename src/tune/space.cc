// The knob table and the spaces built from it (space.h). Each knob's row holds everything about
// it: its domain here (and why values drop out), its default, and how it reaches the process.
#include "tune/space.h"

#include <algorithm>
#include <set>

#include "base/error.h"

namespace bertfit::tune {
namespace {

constexpr unsigned kServe = unsigned(TuneMode::kServe);
constexpr unsigned kInfer = unsigned(TuneMode::kInfer);
constexpr unsigned kTrain = unsigned(TuneMode::kTrain);

int to_int(const std::string& v) {
  try {
    std::size_t used = 0;
    const int n = std::stoi(v, &used);
    if (used == v.size()) return n;
  } catch (const std::exception&) {
  }
  return -1;
}

std::string value_of(const Setting& s, const std::string& knob, const std::string& fallback) {
  const auto it = s.find(knob);
  return it == s.end() ? fallback : it->second;
}

// 1, 2, 4, ... below n, and n itself.
std::vector<std::string> powers_up_to(int n) {
  std::vector<std::string> v;
  for (int t = 1; t < n; t *= 2) v.push_back(std::to_string(t));
  v.push_back(std::to_string(n));
  return v;
}

std::vector<std::string> layout_domain(const Machine& m, const SpaceContext&, TuneMode,
                                       std::string& note) {
  // I instances of T threads each, every core used once at most: IxT with I*T <= cores, and
  // for each I only the T that fill the machine or are powers of two.
  std::vector<std::string> v;
  for (int i = 1; i <= m.cores; ++i) {
    for (const std::string& t : powers_up_to(m.cores / i)) v.push_back(std::to_string(i) + "x" + t);
  }
  if (m.cores == 1) note = "one core";
  return v;
}

void layout_apply(const std::string& v, const Setting&, const SpaceContext&, Launch& l) {
  const std::size_t x = v.find('x');
  l.processes = to_int(v.substr(0, x));
  l.threads = to_int(v.substr(x + 1));
  l.flags.insert(l.flags.end(), {"--threads", v.substr(x + 1)});
}

std::vector<std::string> threads_domain(const Machine& m, const SpaceContext&, TuneMode,
                                        std::string& note) {
  if (m.cores == 1) note = "one core";
  return powers_up_to(m.cores);
}

void threads_apply(const std::string& v, const Setting&, const SpaceContext&, Launch& l) {
  l.threads = to_int(v);
  l.flags.insert(l.flags.end(), {"--threads", v});
}

std::vector<std::string> workers_domain(const Machine& m, const SpaceContext&, TuneMode,
                                        std::string& note) {
  if (m.cores == 1) note = "one core";
  std::vector<std::string> v{"auto"};
  for (const std::string& w : powers_up_to(m.cores)) v.push_back(w);
  return v;
}

void workers_apply(const std::string& v, const Setting&, const SpaceContext&, Launch& l) {
  if (v != "auto") l.flags.insert(l.flags.end(), {"--tokenization-workers", v});
}

std::vector<std::string> ranks_domain(const Machine& m, const SpaceContext& c, TuneMode,
                                      std::string& note) {
  std::vector<std::string> v{"1"};
  if (!m.mpi) {
    note = "this build has no MPI or mpirun is not on PATH";
    return v;
  }
  if (m.cores == 1) note = "one core";
  for (int r = 2; r <= m.cores; ++r) {
    if (m.cores % r == 0 && c.global_batch % r == 0) v.push_back(std::to_string(r));
  }
  return v;
}

void ranks_apply(const std::string& v, const Setting&, const SpaceContext&, Launch& l) {
  l.processes = to_int(v);
}

// The per-process batch of a training step; the global batch (and so the run's trajectory) is
// kept: --grad-accum makes up the rest.
std::vector<std::string> micro_batch_domain(const Machine&, const SpaceContext& c, TuneMode,
                                            std::string&) {
  std::vector<std::string> v;
  for (int b = 4; b <= c.global_batch; b *= 2) {
    if (c.global_batch % b == 0) v.push_back(std::to_string(b));
  }
  if (v.empty() || to_int(v.back()) != c.global_batch) v.push_back(std::to_string(c.global_batch));
  return v;
}

void micro_batch_apply(const std::string& v, const Setting& s, const SpaceContext& c, Launch& l) {
  const int ranks = std::max(1, to_int(value_of(s, "ranks", "1")));
  const int per_rank = std::max(1, c.global_batch / ranks);
  const int b = std::min(to_int(v), per_rank);
  l.flags.insert(l.flags.end(), {"--batch-size", std::to_string(b), "--grad-accum",
                                 std::to_string(std::max(1, per_rank / b))});
}

std::vector<std::string> bucket_domain(const Machine& m, const SpaceContext&, TuneMode,
                                       std::string& note) {
  if (!m.mpi || m.cores == 1) note = "one rank only";
  return {"2", "8", "32"};
}

void bucket_apply(const std::string& v, const Setting&, const SpaceContext&, Launch& l) {
  l.flags.insert(l.flags.end(), {"--bucket-mb", v});
}

// How long an idle OpenMP thread spins before it sleeps, in order: never (passive), 30k spins,
// libgomp's default (300k with the policy unset), 30M, always (active). GOMP_SPINCOUNT acts only
// while OMP_WAIT_POLICY is unset, so the two are one knob.
std::vector<std::string> wait_domain(const Machine&, const SpaceContext&, TuneMode, std::string&) {
  return {"passive", "spin-30k", "default", "spin-30m", "active"};
}

void wait_apply(const std::string& v, const Setting&, const SpaceContext&, Launch& l) {
  if (v == "spin-30k") {
    l.env.emplace_back("GOMP_SPINCOUNT", "30000");
  } else if (v == "spin-30m") {
    l.env.emplace_back("GOMP_SPINCOUNT", "30000000");
  } else if (v != "default") {
    l.env.emplace_back("OMP_WAIT_POLICY", v);
  }
}

std::vector<std::string> bind_domain(const Machine& m, const SpaceContext&, TuneMode,
                                     std::string& note) {
  if (m.cores <= 2) {
    note = "spread: " + std::to_string(m.cores) + " cores, the same as close";
    return {"none", "close"};
  }
  return {"none", "close", "spread"};
}

void bind_apply(const std::string& v, const Setting&, const SpaceContext&, Launch& l) {
  if (v == "none") return;
  l.env.emplace_back("OMP_PROC_BIND", v);
  l.env.emplace_back("OMP_PLACES", "cores");
}

std::vector<std::string> allocator_domain(const Machine& m, const SpaceContext&, TuneMode,
                                          std::string& note) {
  if (m.sanitized) {
    note = "a sanitizer build: a preloaded allocator would abort it";
    return {"glibc"};
  }
  std::vector<std::string> v{"glibc"};
  std::vector<std::string> missing;
  (m.tcmalloc.empty() ? missing : v).push_back("tcmalloc");
  (m.jemalloc.empty() ? missing : v).push_back("jemalloc");
  if (!m.tcmalloc.empty() && !m.jemalloc.empty()) return v;
  note = "not installed:";
  if (m.tcmalloc.empty()) note += " tcmalloc (apt-get install libtcmalloc-minimal4)";
  if (m.jemalloc.empty()) note += " jemalloc (apt-get install libjemalloc2)";
  return v;
}

void allocator_apply(const std::string& v, const Setting&, const SpaceContext&, Launch& l) {
  if (v == "glibc") return;
  static const Machine m = Machine::detect();  // the libraries' paths, looked up once
  const std::string& path = v == "tcmalloc" ? m.tcmalloc : m.jemalloc;
  if (path.empty()) {
    throw_error("allocator ", v, " is not installed (apt-get install ",
                v == "tcmalloc" ? "libtcmalloc-minimal4" : "libjemalloc2", ")");
  }
  l.env.emplace_back("LD_PRELOAD", path);
}

std::vector<std::string> precision_domain(const Machine& m, const SpaceContext&, TuneMode mode,
                                          std::string& note) {
  std::vector<std::string> v{"fp32"};
  if (m.bf16) {
    v.push_back("bf16");
  } else {
    note = "bf16: no native bf16 products on this CPU";
  }
  if (mode == TuneMode::kTrain) return v;
  if (m.int8) {
    v.push_back("int8");
  } else {
    note += std::string(note.empty() ? "" : "; ") + "int8: no VNNI on this CPU";
  }
  return v;
}

void precision_apply(const std::string& v, const Setting&, const SpaceContext&, Launch& l) {
  l.flags.insert(l.flags.end(), {"--precision", v});
}

std::vector<std::string> batch_domain(const Machine&, const SpaceContext&, TuneMode, std::string&) {
  return {"8", "16", "32", "64"};
}

void batch_apply(const std::string& v, const Setting&, const SpaceContext&, Launch& l) {
  l.flags.insert(l.flags.end(), {"--batch-size", v});
}

std::vector<std::string> batch_tokens_domain(const Machine&, const SpaceContext& c, TuneMode,
                                             std::string&) {
  std::vector<std::string> v;
  for (int t = 512; t <= 16384; t *= 2) {
    if (t >= c.max_tokens) v.push_back(std::to_string(t));
  }
  return v;
}

void batch_tokens_apply(const std::string& v, const Setting&, const SpaceContext&, Launch& l) {
  l.flags.insert(l.flags.end(), {"--max-batch-tokens", v});
}

std::vector<std::string> batch_requests_domain(const Machine&, const SpaceContext&, TuneMode,
                                               std::string&) {
  return {"0", "4", "8", "16", "32"};
}

void batch_requests_apply(const std::string& v, const Setting&, const SpaceContext&, Launch& l) {
  l.flags.insert(l.flags.end(), {"--max-batch-requests", v});
}

std::vector<Knob> make_table() {
  return {
      {"layout", "inference processes x compute threads each (each process on its own cores)",
       "1xN", kInfer, true, layout_domain, layout_apply},
      {"threads", "compute threads (--threads)", "N", kServe, true, threads_domain, threads_apply},
      {"workers", "tokenization threads (--tokenization-workers)", "auto", kServe, true,
       workers_domain, workers_apply},
      {"ranks", "training processes (mpirun -np), each on its share of the cores", "1", kTrain,
       true, ranks_domain, ranks_apply},
      {"micro_batch", "examples per forward pass (--batch-size; --grad-accum keeps the step's)",
       "B", kTrain, true, micro_batch_domain, micro_batch_apply},
      {"bucket_mb", "gradient all-reduce bucket in MB (--bucket-mb)", "8", kTrain, true,
       bucket_domain, bucket_apply},
      {"wait", "OpenMP threads' wait policy (OMP_WAIT_POLICY)", "default", kServe | kInfer | kTrain,
       false, wait_domain, wait_apply},
      {"bind", "OpenMP thread binding (OMP_PROC_BIND, OMP_PLACES=cores)", "none",
       kServe | kInfer | kTrain, false, bind_domain, bind_apply},
      {"allocator", "memory allocator (glibc, or preloaded tcmalloc or jemalloc)", "glibc",
       kServe | kInfer | kTrain, false, allocator_domain, allocator_apply},
      {"precision", "matrix products (--precision)", "fp32", kServe | kInfer | kTrain, false,
       precision_domain, precision_apply},
      {"batch_size", "sequences per forward pass (--batch-size)", "32", kInfer, true, batch_domain,
       batch_apply},
      {"max_batch_tokens", "tokens per batch (--max-batch-tokens)", "16384", kServe, true,
       batch_tokens_domain, batch_tokens_apply},
      {"max_batch_requests", "inputs per batch, 0 no limit (--max-batch-requests)", "0", kServe,
       true, batch_requests_domain, batch_requests_apply},
  };
}

// The knob's default on this machine: N = all cores, B = the global batch per process.
std::string default_of(const Knob& k, const Machine& m, const SpaceContext& c) {
  if (k.default_value == "N") return std::to_string(m.cores);
  if (k.default_value == "1xN") return "1x" + std::to_string(m.cores);
  if (k.default_value == "B") return std::to_string(c.global_batch);
  return k.default_value;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

}  // namespace

const char* mode_name(TuneMode mode) {
  switch (mode) {
    case TuneMode::kServe:
      return "serve";
    case TuneMode::kInfer:
      return "infer";
    case TuneMode::kTrain:
      return "train";
  }
  return "?";
}

const std::vector<Knob>& knob_table() {
  static const std::vector<Knob> table = make_table();
  return table;
}

const Knob* find_knob(const std::string& name) {
  for (const Knob& k : knob_table()) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

long Space::combinations() const {
  long n = 1;
  for (const Dim& d : dims) n *= static_cast<long>(d.values.size());
  return n;
}

const Space::Dim* Space::dim(const std::string& name) const {
  for (const Dim& d : dims) {
    if (d.knob->name == name) return &d;
  }
  return nullptr;
}

Setting Space::complete(const Setting& s) const {
  Setting out = fixed;
  for (const auto& [k, v] : s) out[k] = v;
  return out;
}

Setting Space::defaults() const { return complete(searched_defaults); }

std::string check_value(const Knob& knob, const std::string& value, const Machine& machine,
                        const SpaceContext& context) {
  std::vector<std::string> all;
  for (TuneMode mode : {TuneMode::kServe, TuneMode::kInfer, TuneMode::kTrain}) {
    if (!(knob.modes & unsigned(mode))) continue;
    std::string note;
    for (const std::string& v : knob.domain(machine, context, mode, note)) {
      if (std::find(all.begin(), all.end(), v) == all.end()) all.push_back(v);
    }
  }
  if (std::find(all.begin(), all.end(), value) != all.end()) return "";
  return "knob '" + knob.name + "': '" + value + "' is not one of " + join(all, ", ") +
         " on this machine";
}

Space build_space(TuneMode mode, const Machine& machine, const SpaceContext& context,
                  const std::vector<std::string>& fixes) {
  std::map<std::string, std::vector<std::string>> fixed_values;
  for (const std::string& f : fixes) {
    const std::size_t eq = f.find('=');
    const std::string name = f.substr(0, eq);
    const Knob* knob = find_knob(name);
    if (eq == std::string::npos || eq + 1 == f.size()) {
      throw_error("--fix ", f, ": give KNOB=VALUE or KNOB=V1,V2,...");
    }
    if (knob == nullptr) throw_error("--fix ", f, ": unknown knob '", name, "'");
    if (!(knob->modes & unsigned(mode))) {
      throw_error("--fix ", f, ": knob '", name, "' is not one of tune ", mode_name(mode), "'s");
    }
    std::vector<std::string>& values = fixed_values[name];
    std::string rest = f.substr(eq + 1);
    for (std::size_t start = 0; start <= rest.size();) {
      const std::size_t comma = std::min(rest.find(',', start), rest.size());
      values.push_back(rest.substr(start, comma - start));
      start = comma + 1;
    }
  }
  Space space;
  space.mode = mode;
  space.context = context;
  for (const Knob& k : knob_table()) {
    if (!(k.modes & unsigned(mode))) continue;
    std::string note;
    std::vector<std::string> values = k.domain(machine, context, mode, note);
    const std::string def = default_of(k, machine, context);
    if (const auto it = fixed_values.find(k.name); it != fixed_values.end()) {
      for (const std::string& v : it->second) {
        if (std::find(values.begin(), values.end(), v) == values.end()) {
          throw_error("--fix ", k.name, "=", v, ": '", v, "' is not one of ", join(values, ", "),
                      " here");
        }
      }
      values = it->second;
    } else if (!note.empty()) {
      space.dropped.push_back(k.name + ": " + note);
    }
    if (values.size() == 1) {
      space.fixed[k.name] = values[0];
      continue;
    }
    space.searched_defaults[k.name] =
        std::find(values.begin(), values.end(), def) != values.end() ? def : values.front();
    space.dims.push_back({&k, values});
  }
  return space;
}

Launch launch_of(const Setting& s, const SpaceContext& context) {
  Launch launch;
  for (const Knob& k : knob_table()) {
    const auto it = s.find(k.name);
    if (it != s.end()) k.apply(it->second, s, context, launch);
  }
  return launch;
}

std::string describe(const Setting& s) {
  std::string out;
  for (const Knob& k : knob_table()) {
    const auto it = s.find(k.name);
    if (it != s.end()) out += (out.empty() ? "" : " ") + k.name + "=" + it->second;
  }
  return out;
}

std::string command_line(const Launch& launch, const std::string& command_words) {
  std::string out;
  for (const auto& [name, value] : launch.env) out += name + "=" + value + " ";
  out += command_words;
  for (const std::string& f : launch.flags) out += " " + f;
  return out;
}

}  // namespace bertfit::tune
