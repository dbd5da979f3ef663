// Communicator: the one interface the trainer uses to talk to other ranks. Two implementations:
// LocalCommunicator (one process; every collective is the identity) and, when bertfit is built
// with MPI, an MPI communicator (mpi_communicator.cc, the only file family that includes
// <mpi.h>). make_communicator() picks one from the environment, so a plain run and an
// `mpirun -np N` run execute the same code path.
//
// Failure behaviour: every wait (including the ones inside blocking collectives) has a deadline
// (CommOptions::timeout_seconds). On expiry the MPI communicator asks the other ranks which of
// them are alive, then throws bertfit::Error with a message naming this rank and the ranks that
// did not answer; a communicator that has failed aborts the whole job (MPI_Abort) when it is
// destroyed or the process exits, so no rank is left hanging in MPI_Finalize.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace bertfit {

// Element type on the wire for start_allreduce. kBF16 halves the bytes: every rank rounds its
// values to bf16 (nearest even), MPI sums them with a bf16 operator (each addition done in fp32
// and rounded back to bf16), and the final sums are written back into the fp32 buffer,
// identical on every rank.
enum class WireDType { kF32, kBF16 };

// How outstanding non-blocking requests make progress (see the measurements at the top of
// grad_reducer.h, which decided the default):
//  kTestBetweenLayers: requests advance only inside progress()/wait() (MPI_Testall), which the
//                      caller invokes between layers; no extra thread.
//  kCommThread:        one communication thread owns every MPI call (blocking collectives are
//                      queued to it too) and drives the requests continuously.
enum class ProgressMode { kTestBetweenLayers, kCommThread };

const char* wire_dtype_name(WireDType wire);
const char* progress_mode_name(ProgressMode mode);

struct CommOptions {
  double timeout_seconds = 300;  // a wait without completion for this long fails the job
  // The defaults won the measurements at the top of grad_reducer.h.
  ProgressMode progress = ProgressMode::kCommThread;
  // kCommThread only: pause between polls while requests are outstanding. 0: adaptive (yield
  // briefly after each completion, then sleep up to a fraction of the time between
  // completions; see mpi_progress.cc); > 0: sleep this long; < 0: always yield (spin).
  double poll_interval_us = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual int local_rank() const = 0;  // rank among the processes on this host
  virtual int local_world() const = 0;
  // "local" or "MPI (Open MPI v4.1.4, progress: comm thread)": for logs, see describe().
  virtual std::string backend() const = 0;
  virtual std::string host() const = 0;

  // Blocking collectives. All ranks call them in the same order.
  virtual void allreduce_sum(float* data, std::int64_t n) = 0;
  virtual void allreduce_sum(double* data, std::int64_t n) = 0;
  virtual void broadcast(void* data, std::int64_t bytes, int root) = 0;
  // Concatenates every rank's `local` (sizes may differ) in rank order, on every rank.
  virtual std::vector<float> allgatherv(const std::vector<float>& local) = 0;
  virtual void barrier() = 0;

  // Non-blocking sum all-reduce of data[0..n) in place. The buffer must not be touched until
  // wait() returns for the handle. Handles are waited once each, in any order.
  using Handle = std::int64_t;
  virtual Handle start_allreduce(float* data, std::int64_t n, WireDType wire) = 0;
  virtual void wait(Handle h) = 0;  // throws Error on timeout or MPI failure
  virtual void progress() = 0;      // drives outstanding requests (cheap; call between layers)

  // CPU seconds used so far by the communicator's own thread (the comm thread): under a CPU
  // quota this is taken from compute, so the trainer logs it per step.
  virtual double thread_cpu_seconds() const { return 0; }

  // Ends the whole job (all ranks) after printing message: used on timeouts and fatal errors.
  [[noreturn]] virtual void abort(const std::string& message, int code) = 0;
};

// What the environment says about the launch (mpirun/mpiexec/srun export these variables).
struct LaunchInfo {
  bool under_launcher = false;  // OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMI_RANK or PMIX_RANK is set
  int world = 1;                // from OMPI_COMM_WORLD_SIZE / PMI_SIZE; -1 when not given
  int rank = 0;                 // -1 when not given
  std::string variable;         // the variable that revealed the launcher, for messages
  // Tasks of this Slurm job step (SLURM_STEP_NUM_TASKS; 0 outside srun). srun without a
  // process-management interface (--mpi=none, Slurm's default) starts the tasks but tells
  // them no ranks: each would train alone into the same --output.
  int slurm_step_tasks = 0;
};
LaunchInfo detect_launch();

// True when this build contains the MPI communicator.
bool built_with_mpi();

// MPI when launched by mpirun/mpiexec/srun --mpi=pmix (LaunchInfo::under_launcher) and built
// with MPI; otherwise a LocalCommunicator (rank 0 of 1). Throws Error when the environment says
// this is one of several ranks but the build has no MPI support, or when srun started several
// tasks without PMIx/PMI (the error names `srun --mpi=pmix`).
std::unique_ptr<Communicator> make_communicator(const CommOptions& options);

// The set-up vote: every rank calls it at the same point with the error it hit before it
// (empty: none), so that a failure ends the job without MPI_Abort (and its banner): no rank is
// left waiting, every rank returns from main and MPI is finalised. Returns when no rank failed;
// otherwise throws on every rank: JobError with the message when every rank failed with the
// same one (the CLI prints it once, on rank 0: base/error.h), else Error naming this rank and
// its error on each rank that failed, and JobError naming the failed ranks on the others.
void agree_on_setup(Communicator& comm, const std::string& error);

// One line for logs: "rank 1 of 4 (local 0 of 1 on host vm), MPI (Open MPI v4.1.4, ...)".
std::string describe(const Communicator& comm);

}  // namespace bertfit
