// Launcher detection and the choice between the local and the MPI communicator.
#include "comm/communicator.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "comm/local_communicator.h"
#ifdef BERTFIT_WITH_MPI
#include "comm/mpi_communicator.h"
#endif

namespace bertfit {
namespace {

// Parses a non-negative integer environment variable; -1 when unset or malformed.
int env_int(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return -1;
  char* end = nullptr;
  long v = std::strtol(value, &end, 10);
  if (*end != '\0' || v < 0 || v > 1 << 30) return -1;
  return static_cast<int>(v);
}

}  // namespace

const char* wire_dtype_name(WireDType wire) { return wire == WireDType::kBF16 ? "bf16" : "f32"; }

const char* progress_mode_name(ProgressMode mode) {
  return mode == ProgressMode::kCommThread ? "comm thread" : "test between layers";
}

LaunchInfo detect_launch() {
  LaunchInfo info;
  // Open MPI (mpirun), then MPICH / Intel MPI (Hydra's PMI), then any PMIx launcher.
  static constexpr const char* kSizeVars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
  static constexpr const char* kRankVars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
  for (const char* var : kSizeVars) {
    if (std::getenv(var) != nullptr) {
      info.under_launcher = true;
      info.variable = var;
      info.world = env_int(var);
      break;
    }
  }
  for (const char* var : kRankVars) {
    if (std::getenv(var) != nullptr) {
      if (!info.under_launcher) {
        info.under_launcher = true;
        info.variable = var;
        info.world = -1;
      }
      info.rank = env_int(var);
      break;
    }
  }
  info.slurm_step_tasks = std::max(0, env_int("SLURM_STEP_NUM_TASKS"));
  return info;
}

bool built_with_mpi() {
#ifdef BERTFIT_WITH_MPI
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> make_communicator(const CommOptions& options) {
  if (!(options.timeout_seconds > 0)) {
    throw_error("--comm-timeout must be positive (got ", options.timeout_seconds, " s)");
  }
  LaunchInfo launch = detect_launch();
  if (!launch.under_launcher && launch.slurm_step_tasks > 1) {
    throw_error("srun started this process as one of ", launch.slurm_step_tasks,
                " tasks (SLURM_STEP_NUM_TASKS) without telling it its rank (no PMIx/PMI "
                "variables): launch with `srun --mpi=pmix` (or set MpiDefault=pmix in "
                "slurm.conf); see docs/DISTRIBUTED.md");
  }
  if (!launch.under_launcher) return std::make_unique<LocalCommunicator>();
#ifdef BERTFIT_WITH_MPI
  return make_mpi_communicator(options);
#else
  if (launch.world == 1) return std::make_unique<LocalCommunicator>();
  std::string size =
      launch.world > 1 ? cat("one of ", launch.world, " ranks") : "one of several ranks";
  throw_error("this process was started by an MPI launcher as ", size, " (", launch.variable,
              " is set) but bertfit was built without MPI support; install libopenmpi-dev "
              "(scripts/setup.sh) and rebuild, or run without mpirun");
#endif
}

void agree_on_setup(Communicator& comm, const std::string& error) {
  const int world = comm.world(), rank = comm.rank();
  if (world == 1) {
    if (!error.empty()) throw JobError(error);
    return;
  }
  // FNV-1a of the message, then rank 0's hash to every rank: the same message, the same hash.
  std::uint64_t hash = 1469598103934665603ull, rank0_hash = 0;
  for (unsigned char c : error) hash = (hash ^ c) * 1099511628211ull;
  if (error.empty()) hash = 0;
  rank0_hash = hash;
  comm.broadcast(&rank0_hash, sizeof rank0_hash, 0);
  // votes[r]: rank r failed; votes[world]: ranks that failed with rank 0's message.
  std::vector<double> votes(static_cast<std::size_t>(world) + 1, 0.0);
  votes[static_cast<std::size_t>(rank)] = error.empty() ? 0 : 1;
  votes.back() = !error.empty() && hash == rank0_hash ? 1 : 0;
  comm.allreduce_sum(votes.data(), static_cast<std::int64_t>(votes.size()));
  if (votes.back() == world) throw JobError(error);
  std::string failed;
  for (int r = 0; r < world; ++r) {
    if (votes[static_cast<std::size_t>(r)] > 0) failed += cat(failed.empty() ? "" : ", ", r);
  }
  if (failed.empty()) return;
  if (!error.empty()) throw Error(cat("rank ", rank, ": ", error));
  throw JobError(cat("the set-up failed on rank(s) ", failed));
}

std::string describe(const Communicator& comm) {
  return cat("rank ", comm.rank(), " of ", comm.world(), " (local ", comm.local_rank(), " of ",
             comm.local_world(), " on host ", comm.host(), "), ", comm.backend());
}

}  // namespace bertfit
