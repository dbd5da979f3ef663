// Process-wide MPI state shared by every MpiCommunicator: initialisation (once), finalisation at
// exit (or MPI_Abort of the whole job if any communicator failed), the lock that serialises MPI
// calls, error strings, and the bf16 sum operator. Internal to comm/.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <mutex>
#include <string>

namespace bertfit::mpi {

// Calls MPI_Init_thread (requesting MPI_THREAD_SERIALIZED) the first time; returns the thread
// level provided. MPI is finalised when the process exits normally.
int ensure_initialized();

// Held around every MPI call, so MPI_THREAD_SERIALIZED suffices even with comm threads.
std::mutex& lock();

// "MPI_ERR_TRUNCATE: message truncated" for an MPI error code.
std::string error_string(int code);

// First line of MPI_Get_library_version up to the first comma: "Open MPI v4.1.4".
std::string library_version();

// Sum of bf16 values (as MPI_UINT16_T): each pair is added in fp32 and rounded back to bf16.
MPI_Op bf16_sum_op();

// After a failure: at exit the job is aborted with `code` instead of finalised.
void mark_failed(int code);

// Largest element count passed to one MPI call (counts are ints); longer buffers are split.
inline constexpr std::int64_t kMaxChunk = std::int64_t{1} << 30;

}  // namespace bertfit::mpi
