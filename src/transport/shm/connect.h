// connect.h (shm): finding which ranks of a group share this host, and
// giving their messages shared memory instead of loopback TCP.
#pragma once

#include <memory>
#include <vector>

#include "cohort/store.h"
#include "common/deadline.h"
#include "common/status.h"
#include "transport/rank_place.h"
#include "transport/shm/arena.h"

namespace cohort::shm {

// host_leaders returns, for every group rank, the lowest group rank on
// its host, from the host identities the ranks published with their
// addresses (places[q].host; rank_place.h). COHORT_SHM_RANKS_PER_HOST > 0
// splits one machine into pretend hosts of that many consecutive global
// ranks (tests of the mixed paths).
std::vector<int> host_leaders(const std::vector<RankPlace>& places, const std::vector<int>& global_ranks);

// connect_host builds the shared memory of this rank's host for the
// group ranks whose leader (host_leaders) is this rank's: null when no
// other rank of the group is here, or when the segment cannot be made
// (every rank of the host then keeps TCP, with a warning); kTimeout when a
// rank never arrives.
// `places` (as published) tell whether the host's ranks outnumber their CPUs.
Result<std::shared_ptr<Arena>> connect_host(Store& store, int rank, const std::vector<int>& leaders,
                                            const std::vector<RankPlace>& places, Deadline deadline);

}  // namespace cohort::shm
