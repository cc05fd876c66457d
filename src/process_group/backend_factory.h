// backend_factory.h: makes the optional backends (MPI, NCCL) without
// exposing their libraries' headers: distributed.cc includes only this.
// Each returns BackendError naming the build option when cohort was built
// without that backend.
#pragma once

#include <memory>
#include <vector>

#include "cohort/store.h"
#include "process_group/backend.h"

namespace cohort {

// mpi_world initialises MPI (once per process) and reports this process's
// rank and the size of MPI_COMM_WORLD.
Status mpi_world(int* rank, int* size);

// mpi_built and nccl_built say whether this build has those backends.
bool mpi_built();
bool nccl_built();

// make_mpi_backend makes the MPI backend of the group of MPI_COMM_WORLD
// ranks `world_ranks` (this process is one of them); `tag` tells apart
// groups made one after the other.
Result<std::unique_ptr<Backend>> make_mpi_backend(const std::vector<int>& world_ranks, int tag);

// make_nccl_backend makes the NCCL backend of a group (CUDA buffers). Its
// communicator is made at the group's first CUDA operation, through
// `store` (rank 0 publishes the ncclUniqueId), so that a group with
// "cpu:cohort,cuda:nccl" works for CPU buffers on a machine without a GPU.
Result<std::unique_ptr<Backend>> make_nccl_backend(std::shared_ptr<Store> store, int rank, int size,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& name);

}  // namespace cohort
