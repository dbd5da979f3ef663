// --config tuned.json before the parse (see tuned_config.h): read the file, set its environment
// and execute the binary again when a variable must change, then insert its flags.
#include "apps/bertfit/tuned_config.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "comm/communicator.h"
#include "flags/groups.h"
#include "tune/space.h"
#include "tune/tuned_file.h"

namespace bertfit::cli {
namespace {

// Set in the environment of the second start: the file's variables are in place.
constexpr const char* kMarker = "BERTFIT_TUNED_ENV";

// Whether `cmd` declares the tuned.json --config (init's --config is a model's config.json).
bool takes_tuned_config(const CLI::App& cmd) {
  const CLI::Option* o = cmd.get_option_no_throw("--config");
  std::string unused;
  return o != nullptr && o->get_description() == tuned_config_flags(unused).front().help;
}

const CLI::App* find_command(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == name) return sub;
  }
  return nullptr;
}

// Whether `flag` is given in args[from..] as `--flag V` or `--flag=V` (before any "--").
bool given(const std::vector<std::string>& args, std::size_t from, const std::string& flag) {
  for (std::size_t i = from; i < args.size() && args[i] != "--"; ++i) {
    if (args[i] == flag || args[i].rfind(flag + "=", 0) == 0) return true;
  }
  return false;
}

// A note on stderr, from rank 0 only under an MPI launcher (every rank reads the same file).
void note(const std::string& text) {
  if (detect_launch().rank <= 0) std::fprintf(stderr, "bertfit: %s\n", text.c_str());
}

// The machine the file was tuned on, when its record says it was another: one warning.
void warn_if_another_machine(const std::string& prefix, const tune::TunedFile& f,
                             const tune::Machine& here) {
  const nlohmann::json& m = f.machine;
  const bool other_cpu = m.contains("cpu") && m["cpu"].is_string() && m["cpu"] != here.cpu;
  const bool other_cores =
      m.contains("cores") && m["cores"].is_number_integer() && m["cores"] != here.cores;
  if (!other_cpu && !other_cores) return;
  const std::string there = (m.contains("cpu") ? m["cpu"].dump() : "?") + ", " +
                            (m.contains("cores") ? m["cores"].dump() : "?") + " cores";
  const std::string now =
      nlohmann::json(here.cpu).dump() + ", " + std::to_string(here.cores) + " cores";
  note(prefix + "warning: tuned on another machine (" + there + "; this one: " + now +
       "): its settings may not be the fastest here");
}

// Sets the variables the file asks for that the user's environment does not set; true when one
// was set (the process must start again for them to act).
bool set_environment(const std::string& prefix, const tune::Launch& launch) {
  bool changed = false;
  for (const auto& [name, value] : launch.env) {
    const char* mine = std::getenv(name.c_str());
    if (mine != nullptr) {
      if (value != mine) {
        note(prefix + name + "=" + mine + " from the environment wins over the file's " + value);
      }
      continue;
    }
    if (::setenv(name.c_str(), value.c_str(), 1) != 0) {
      throw_error(prefix, "cannot set ", name, " (", std::strerror(errno), ")");
    }
    changed = true;
  }
  return changed;
}

}  // namespace

TunedArgs apply_tuned_config(const CLI::App& app, char** argv) {
  TunedArgs out;
  for (char** a = argv + 1; *a != nullptr; ++a) out.args.emplace_back(*a);
  std::vector<std::string>& args = out.args;
  std::size_t at = 0;  // the command word
  while (at < args.size() && !args[at].empty() && args[at][0] == '-') ++at;
  if (at == args.size()) return out;
  const CLI::App* cmd = find_command(app, args[at]);
  if (cmd == nullptr || !takes_tuned_config(*cmd)) return out;
  std::string file;
  for (std::size_t i = at + 1; i < args.size() && args[i] != "--" && file.empty(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) file = args[i + 1];
    if (args[i].rfind("--config=", 0) == 0) file = args[i].substr(9);
  }
  if (file.empty()) return out;  // none, or no value: CLI11 says so
  const std::string prefix = "--config " + file + ": ";

  // The second start (the variables set) says nothing the first said, and hands no marker on.
  // The marker holds the cores the first start had: OMP_PROC_BIND binds this process's initial
  // thread to one place when libgomp loads, so the second start sees fewer.
  const char* marker = std::getenv(kMarker);
  const bool first_start = marker == nullptr;
  tune::Machine machine = tune::Machine::detect();
  if (!first_start) {
    machine.cores = std::max(machine.cores, std::atoi(marker));
    ::unsetenv(kMarker);
  }
  tune::Machine reading = machine;
  reading.sanitized = false;  // a preloaded allocator is left out below, with a note
  tune::TunedFile f;
  try {
    f = tune::read_tuned_file(file, reading);
  } catch (const Error& e) {
    throw JobError(e.what());  // every rank reads the same file: reported once
  }
  if (first_start) warn_if_another_machine(prefix, f, machine);

  tune::Setting setting = f.settings;
  const auto allocator = setting.find("allocator");
  if (machine.sanitized && allocator != setting.end() && allocator->second != "glibc") {
    if (first_start) {
      note(prefix + "allocator " + allocator->second +
           " left out: a sanitizer build cannot run under another allocator");
    }
    setting.erase(allocator);
  }
  const tune::Launch launch = tune::launch_of(setting, f.context);
  if (first_start && set_environment(prefix, launch)) {
    ::setenv(kMarker, std::to_string(machine.cores).c_str(), 1);
    std::fflush(stderr);
    ::execv("/proc/self/exe", argv);
    throw JobError(cat(prefix, "cannot start bertfit again with the file's environment (",
                       std::strerror(errno), ")"));
  }

  // The flags: the command line's own win; a flag this command does not have is left out.
  std::vector<std::string> flags;
  for (std::size_t i = 0; i + 1 < launch.flags.size(); i += 2) {
    const std::string& flag = launch.flags[i];
    if (given(args, at + 1, flag) || given(flags, 0, flag)) continue;
    if (cmd->get_option_no_throw(flag) == nullptr) {
      note(prefix + flag + " " + launch.flags[i + 1] + " does not apply to '" + cmd->get_name() +
           "': left out");
      continue;
    }
    flags.insert(flags.end(), {flag, launch.flags[i + 1]});
  }
  if (launch.processes > 1) {
    const int n = launch.processes;
    if (cmd->get_name() == "train") {
      const LaunchInfo l = detect_launch();
      if (!l.under_launcher || l.world != n) {
        note(cat(prefix, "tuned for ", n, " ranks: run it under mpirun -np ", n));
      }
    } else {
      note(cat(prefix, "tuned for ", n, " processes of ", launch.threads, " thread",
               launch.threads == 1 ? "" : "s",
               " each; this is one of them (start the others alike, each on its own cores)"));
    }
  }
  args.insert(args.begin() + static_cast<std::ptrdiff_t>(at) + 1, flags.begin(), flags.end());
  out.file = file;
  out.inserted = static_cast<int>(flags.size() / 2);
  return out;
}

}  // namespace bertfit::cli
