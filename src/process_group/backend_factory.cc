// The factories of backend_factory.h for backends this build lacks; the
// built ones define theirs next to their code (mpi/mpi_backend.cc).
#include "process_group/backend_factory.h"

namespace cohort {

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

}  // namespace cohort
