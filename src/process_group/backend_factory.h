// backend_factory.h: makes the optional backends (MPI, NCCL) without
// exposing their libraries' headers: distributed.cc includes only this.
// Each returns BackendError naming the build option when cohort was built
// without that backend.
#pragma once

#include <memory>
#include <vector>

#include "process_group/backend.h"

namespace cohort {

// mpi_world initialises MPI (once per process) and reports this process's
// rank and the size of MPI_COMM_WORLD.
Status mpi_world(int* rank, int* size);

// make_mpi_backend makes the MPI backend of the group of MPI_COMM_WORLD
// ranks `world_ranks` (this process is one of them); `tag` tells apart
// groups made one after the other.
Result<std::unique_ptr<Backend>> make_mpi_backend(const std::vector<int>& world_ranks, int tag);

}  // namespace cohort
