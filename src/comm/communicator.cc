// Launcher detection and the choice between the local and the MPI communicator.
#include "comm/communicator.h"

#include <cstdlib>
#include <string_view>

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

const char* grad_transport_name(GradTransport transport) {
  return transport == GradTransport::kTcpRing ? "tcp" : "mpi";
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

std::string describe(const Communicator& comm) {
  return cat("rank ", comm.rank(), " of ", comm.world(), " (local ", comm.local_rank(), " of ",
             comm.local_world(), " on host ", comm.host(), "), ", comm.backend());
}

}  // namespace bertfit
