// Topology and pinning: affinity masks, cgroup CPU quotas, and the per-rank split.
#include "comm/topology.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/check.h"
#include "base/error.h"

namespace bertfit {
namespace {

std::vector<int> affinity_of(pid_t pid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (sched_getaffinity(pid, sizeof(set), &set) != 0) return cores;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cores.push_back(c);
  }
  return cores;
}

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  return line;
}

// Quota in cores from one cgroup directory; 0 when unlimited or absent.
double quota_in(const std::string& dir) {
  std::string max = read_first_line(dir + "/cpu.max");  // v2: "max 100000" or "50000 100000"
  if (!max.empty()) {
    std::istringstream in(max);
    std::string quota;
    double period = 0;
    in >> quota >> period;
    if (quota == "max" || period <= 0) return 0;
    return std::atof(quota.c_str()) / period;
  }
  std::string quota = read_first_line(dir + "/cpu.cfs_quota_us");  // v1: -1 when unlimited
  std::string period = read_first_line(dir + "/cpu.cfs_period_us");
  if (quota.empty() || period.empty()) return 0;
  double q = std::atof(quota.c_str()), p = std::atof(period.c_str());
  return q > 0 && p > 0 ? q / p : 0;
}

// Tightest quota along path and its ancestors under a cgroup mount point.
double tightest_quota(const std::string& mount, std::string path) {
  double best = 0;
  while (true) {
    double q = quota_in(cat(mount, path));
    if (q > 0 && (best == 0 || q < best)) best = q;
    if (path.empty() || path == "/") break;
    std::size_t slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return best;
}

}  // namespace

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cores;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t\n"));
    item.erase(item.find_last_not_of(" \t\n") + 1);
    if (item.empty()) continue;
    // "N" or "N-M", digits only.
    int first = -1, last = -1;
    std::size_t dash = item.find('-');
    auto number = [](const std::string& digits) {
      if (digits.empty() || digits.size() > 6 ||
          digits.find_first_not_of("0123456789") != std::string::npos) {
        return -1;
      }
      return std::atoi(digits.c_str());
    };
    first = number(item.substr(0, dash));
    last = dash == std::string::npos ? first : number(item.substr(dash + 1));
    if (first < 0 || last < first)
      throw_error("malformed CPU list \"", text, "\" at \"", item, "\"");
    for (int c = first; c <= last; ++c) cores.push_back(c);
  }
  std::sort(cores.begin(), cores.end());
  cores.erase(std::unique(cores.begin(), cores.end()), cores.end());
  return cores;
}

std::string format_cpu_list(const std::vector<int>& cores) {
  std::string text;
  for (std::size_t i = 0; i < cores.size();) {
    std::size_t j = i;
    while (j + 1 < cores.size() && cores[j + 1] == cores[j] + 1) ++j;
    if (!text.empty()) text += ",";
    text += std::to_string(cores[i]);
    if (j > i) {
      text += '-';
      text += std::to_string(cores[j]);
    }
    i = j + 1;
  }
  return text;
}

std::vector<int> allowed_cores() {
  std::vector<int> own = affinity_of(0);
  const char* bound = std::getenv("OMPI_MCA_orte_bound_at_launch");
  const char* policy = std::getenv("OMPI_MCA_hwloc_base_binding_policy");
  if (bound != nullptr && std::strcmp(bound, "1") == 0 && policy == nullptr) {
    // Open MPI's default binding, not the user's: take the launcher's cores.
    std::vector<int> parent = affinity_of(getppid());
    if (parent.size() > own.size() &&
        std::includes(parent.begin(), parent.end(), own.begin(), own.end())) {
      return parent;
    }
  }
  return own;
}

double cpu_quota_cores() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  double best = 0;
  auto consider = [&](double q) {
    if (q > 0 && (best == 0 || q < best)) best = q;
  };
  while (std::getline(in, line)) {
    // "hierarchy-id:controller-list:path"
    std::size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) {  // cgroup v2 (unified)
      consider(tightest_quota("/sys/fs/cgroup", path));
      consider(tightest_quota("/sys/fs/cgroup/unified", path));
      continue;
    }
    std::stringstream list(controllers);
    std::string c;
    while (std::getline(list, c, ',')) {
      if (c != "cpu") continue;
      consider(tightest_quota(cat("/sys/fs/cgroup/", controllers), path));
      if (controllers != "cpu") consider(tightest_quota("/sys/fs/cgroup/cpu", path));
    }
  }
  return best;
}

CpuShare cpu_share_of(const std::vector<int>& allowed, double quota_cores, int local_rank,
                      int local_world) {
  CHECK(local_world >= 1 && local_rank >= 0 && local_rank < local_world, "cpu_share: local rank ",
        local_rank, " of ", local_world);
  CHECK(!allowed.empty(), "cpu_share: no allowed cores");
  CpuShare share;
  const auto count = static_cast<std::int64_t>(allowed.size());
  if (count >= local_world) {
    std::int64_t per_rank = count / local_world;
    for (std::int64_t i = local_rank * per_rank; i < (local_rank + 1) * per_rank; ++i) {
      share.cores.push_back(allowed[static_cast<std::size_t>(i)]);
    }
  } else {
    share.cores.push_back(allowed[static_cast<std::size_t>(local_rank * count / local_world)]);
  }
  // The quota belongs to the cgroup that all local ranks share.
  share.quota_cores = quota_cores > 0 ? quota_cores / local_world : 0;
  return share;
}

CpuShare cpu_share(int local_rank, int local_world) {
  return cpu_share_of(allowed_cores(), cpu_quota_cores(), local_rank, local_world);
}

int share_threads(const CpuShare& share) {
  int threads = static_cast<int>(share.cores.size());
  if (share.quota_cores > 0) {
    threads = std::min(threads, static_cast<int>(std::floor(share.quota_cores + 1e-9)));
  }
  return std::max(1, threads);
}

int apply_cpu_share(const CpuShare& share) {
  CHECK(!share.cores.empty(), "apply_cpu_share: empty share");
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : share.cores) {
    CHECK(c >= 0 && c < CPU_SETSIZE, "core id ", c);
    CPU_SET(c, &set);
  }
  // Every existing thread (an OpenMP pool may already run), then the calling thread last so
  // that an error names it.
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] == '.') continue;
      sched_setaffinity(static_cast<pid_t>(std::atoi(entry->d_name)), sizeof(set), &set);
    }
    closedir(dir);
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    throw_error("cannot pin this process to cores ", format_cpu_list(share.cores), ": ",
                std::strerror(errno), " (allowed: ", format_cpu_list(affinity_of(0)), ")");
  }
  return share_threads(share);
}

std::string describe_share(const CpuShare& share) {
  std::string text = cat("cores ", format_cpu_list(share.cores));
  if (share.quota_cores > 0) text += cat(", quota ", share.quota_cores, " core");
  int threads = share_threads(share);
  return text + cat(" (", threads, threads == 1 ? " thread)" : " threads)");
}

}  // namespace bertfit
