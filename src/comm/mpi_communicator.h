// Factory for the MPI communicator (built only when CMake finds MPI). This header does not
// include <mpi.h>: only the .cc files of comm/ do.
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace bertfit {

// Initialises MPI on first use (once per process) and returns a communicator over a private
// duplicate of MPI_COMM_WORLD. Several may exist; they never see each other's messages.
std::unique_ptr<Communicator> make_mpi_communicator(const CommOptions& options);

}  // namespace bertfit
