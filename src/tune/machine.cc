// Machine::detect (space.h): what this machine offers the knobs, read once per use.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "comm/communicator.h"
#include "comm/topology.h"
#include "gemm/gemm.h"
#include "tune/space.h"

namespace bertfit::tune {
namespace {

bool readable(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

std::string find_library(const std::string& name) {
  for (const char* dir :
       {"/usr/lib/x86_64-linux-gnu/", "/usr/lib/aarch64-linux-gnu/", "/usr/lib/", "/usr/lib64/"}) {
    if (readable(dir + name)) return dir + name;
  }
  return "";
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  for (std::size_t start = 0; start <= dirs.size();) {
    const std::size_t colon = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, colon - start);
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) return true;
    start = colon + 1;
  }
  return false;
}

// A core of `cores` shares its physical core with another allowed one (hyper-threads).
bool has_smt(const std::vector<int>& cores) {
  for (int c : cores) {
    std::ifstream f("/sys/devices/system/cpu/cpu" + std::to_string(c) +
                    "/topology/thread_siblings_list");
    std::string list;
    if (f >> list && parse_cpu_list(list).size() > 1) return true;
  }
  return false;
}

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

}  // namespace

Machine Machine::detect() {
  Machine m;
  const std::vector<int> cores = allowed_cores();
  m.cores = static_cast<int>(cores.size());
  const double quota = cpu_quota_cores();
  if (quota > 0) m.cores = std::min(m.cores, std::max(1, static_cast<int>(std::floor(quota))));
  m.cores = std::max(1, m.cores);
  m.smt = has_smt(cores);
  m.int8 = has_int8_vnni();
  m.bf16 = has_native_bf16();
  m.tcmalloc = find_library("libtcmalloc_minimal.so.4");
  m.jemalloc = find_library("libjemalloc.so.2");
#if defined(__SANITIZE_ADDRESS__)
  m.sanitized = true;
#endif
  m.mpi = built_with_mpi() && on_path("mpirun");
  m.cpu = cpu_model_name();
  return m;
}

}  // namespace bertfit::tune
