// connect.h (shm): finding which ranks of a group share this host, and
// giving their messages shared memory instead of loopback TCP.
#pragma once

#include <vector>

#include "cohort/store.h"
#include "common/deadline.h"
#include "common/status.h"
#include "transport/tcp/transport.h"

namespace cohort::shm {

// same_host_ranks publishes this rank's host identity under
// "shm/host/<rank>" of the group's `store`, waits for every rank's, and
// returns, for every group rank, the lowest group rank on its host.
// COHORT_SHM_RANKS_PER_HOST > 0 splits one machine into pretend hosts of
// that many consecutive global ranks (tests of the mixed paths).
Result<std::vector<int>> host_leaders(Store& store, int rank, const std::vector<int>& global_ranks,
                                      Deadline deadline);

// connect_shm sets up the shared memory of this rank's host for `transport`
// when COHORT_SHM allows it and other ranks of the group are here. A
// failure to make the segment is not fatal: every rank of the host then
// keeps TCP (with a warning); a rank that never arrives is (kTimeout).
Status connect_shm(Store& store, tcp::TcpTransport& transport, const std::vector<int>& global_ranks,
                   Deadline deadline);

}  // namespace cohort::shm
