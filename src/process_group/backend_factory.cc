// The factories of backend_factory.h for backends this build lacks; the
// built ones define theirs next to their code (mpi/mpi_backend.cc,
// nccl/nccl_backend.cc).
#include "process_group/backend_factory.h"

namespace cohort {

bool mpi_built() {
#ifdef COHORT_HAVE_MPI
  return true;
#else
  return false;
#endif
}

bool nccl_built() {
#ifdef COHORT_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

#ifndef COHORT_HAVE_MPI
namespace {
Status no_mpi() {
  return Status(StatusCode::kBackendError,
                "backend 'mpi' is not built into this cohort (configure with -DCOHORT_WITH_MPI=ON and "
                "Open MPI installed: apt-get install libopenmpi-dev)");
}
}  // namespace
Status mpi_world(int*, int*) {
  return no_mpi();
}
Result<std::unique_ptr<Backend>> make_mpi_backend(const std::vector<int>&, int) {
  return no_mpi();
}
#endif

#ifndef COHORT_HAVE_NCCL
Result<std::unique_ptr<Backend>> make_nccl_backend(std::shared_ptr<Store>, int, int,
                                                   std::chrono::milliseconds, const std::string&) {
  return Status(
      StatusCode::kBackendError,
      "backend 'nccl' is not built into this cohort (configure with -DCOHORT_WITH_NCCL=ON, with NCCL "
      "and the CUDA runtime under CUDA_HOME or /usr/local/cuda)");
}
#endif

}  // namespace cohort
