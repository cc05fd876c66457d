// backend_module.h: what an optional backend's module (libcohort_mpi.so,
// libcohort_nccl.so) hands libcohort when backend_factory.cc loads it.
//
// The MPI and NCCL backends are modules of their own, loaded the first time
// a group asks for them, not libraries libcohort links: every process that
// links libcohort would otherwise map and relocate libnccl, libcudart,
// libmpi and Open MPI's runtime at its start (7 of the 11 ms of CPU a
// process linking libcohort took here before its main), which at 128
// ranks on one host was a quarter of a job's time to its first barrier.
//
// A module is built from this source tree with libcohort, so the table
// holds C++ types; `abi` catches a module left over from another build.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cohort/store.h"
#include "process_group/backend.h"

namespace cohort {

// kBackendModuleAbi changes whenever BackendModule does.
constexpr int kBackendModuleAbi = 1;

// BackendModule is a module's table: the factories of backend_factory.h
// that it makes (null for the others).
struct BackendModule {
  int abi = kBackendModuleAbi;
  Status (*mpi_world)(int* rank, int* size) = nullptr;
  Result<std::unique_ptr<Backend>> (*make_mpi_backend)(const std::vector<int>& world_ranks,
                                                       int tag) = nullptr;
  Result<std::unique_ptr<Backend>> (*make_nccl_backend)(std::shared_ptr<Store> store, int rank, int size,
                                                        std::chrono::milliseconds timeout,
                                                        const std::string& name) = nullptr;
};

}  // namespace cohort

// Each module defines its entry, found by name with dlsym.
extern "C" const cohort::BackendModule* cohort_mpi_module();
extern "C" const cohort::BackendModule* cohort_nccl_module();
