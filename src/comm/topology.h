// Topology and pinning: which cores this process may use, how ranks on one host share them,
// and pinning to the share, so that no user ever writes a core mask (issue: "Pinning done for
// the user"). Linux only (sched_getaffinity / sched_setaffinity, cgroup files).
#pragma once

#include <string>
#include <vector>

namespace bertfit {

// The cores of one rank; quota_cores > 0 when a CFS quota (cgroup cpu controller) caps the
// process below its core count (an emulated node with half a core, a container limit).
struct CpuShare {
  std::vector<int> cores;
  double quota_cores = 0;
};

// Cores this process may run on: sched_getaffinity. When Open MPI bound the process itself at
// launch (its default binds each rank to one core for -np <= 2), the binding of the launcher
// (the parent process: mpirun or orted) is used instead, so that local ranks split the cores
// they were given rather than one core each; an explicit --bind-to is respected.
std::vector<int> allowed_cores();

// CPU quota of this process's cgroup in cores (cgroup v2 cpu.max or v1 cpu.cfs_quota_us over
// cpu.cfs_period_us, the tightest along the hierarchy); 0 when unlimited or unknown.
double cpu_quota_cores();

// Share of local rank r of n: the allowed cores split into n contiguous equal groups (the
// remainder of an uneven split stays unused); with fewer cores than ranks, rank r gets core
// r * cores / n (shared, unavoidable).
CpuShare cpu_share(int local_rank, int local_world);
CpuShare cpu_share_of(const std::vector<int>& allowed, double quota_cores, int local_rank,
                      int local_world);

// Pins every thread of the calling process to share.cores (sched_setaffinity); returns the
// thread count to use: the group's size, capped by the quota (at least 1).
int apply_cpu_share(const CpuShare& share);

// Threads a share supports without applying it: min(cores, floor(quota)), at least 1.
int share_threads(const CpuShare& share);

// "cores 2-3 (2 threads)" or "cores 0-1, quota 0.5 core (1 thread)", for logs.
std::string describe_share(const CpuShare& share);

// Parses a kernel CPU list ("0-3,8,10-11") into sorted core ids; throws Error when malformed.
std::vector<int> parse_cpu_list(const std::string& text);
std::string format_cpu_list(const std::vector<int>& cores);

}  // namespace bertfit
