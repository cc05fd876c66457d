// connect.h (shm): finding which ranks of a group share this host, and
// giving their messages shared memory instead of loopback TCP.
#pragma once

#include <memory>
#include <vector>

#include "cohort/store.h"
#include "common/deadline.h"
#include "common/status.h"
#include "transport/shm/arena.h"

namespace cohort::shm {

// same_host_ranks publishes this rank's host identity under
// "shm/host/<rank>" of the group's `store`, waits for every rank's, and
// returns, for every group rank, the lowest group rank on its host.
// COHORT_SHM_RANKS_PER_HOST > 0 splits one machine into pretend hosts of
// that many consecutive global ranks (tests of the mixed paths).
Result<std::vector<int>> host_leaders(Store& store, int rank, const std::vector<int>& global_ranks,
                                      Deadline deadline);

// connect_host builds the shared memory of this rank's host for the
// group ranks whose leader (host_leaders) is this rank's: null when no
// other rank of the group is here, or when the segment cannot be made
// (every rank of the host then keeps TCP, with a warning); kTimeout when a
// rank never arrives.
Result<std::shared_ptr<Arena>> connect_host(Store& store, int rank, const std::vector<int>& leaders,
                                            Deadline deadline);

}  // namespace cohort::shm
