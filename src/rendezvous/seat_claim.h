// seat_claim.h: each rank of a group claims its seat in the group's store
// before it publishes its address, so that two processes started with the
// same RANK (a typo, or a process of another job that found this job's
// store on the same MASTER_PORT) and ranks that disagree on WORLD_SIZE are
// named at once, on every rank involved, instead of one of them failing
// after the timeout with a connect error.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "cohort/store.h"
#include "common/status.h"

namespace cohort {

// claim_seat records that this process is rank `rank` of `size` (keys
// under "seat/" of `store`). Fails with InvalidArgument when another
// process (another pid or host) holds the seat already, naming both, or
// when a rank before it said another world size, naming both ranks and
// sizes; either way it leaves the reason where seat_problem finds it.
Status claim_seat(Store& store, int rank, int size);

// seat_problem is the reason a claim failed in this group, if one did:
// the ranks still waiting for their peers' addresses fail with it instead
// of waiting out their timeout.
std::optional<std::string> seat_problem(Store& store);

// acknowledge_seat_problem tells the refused rank that this one has read
// the reason; linger_until_seen keeps a refused rank (which may host the
// store) until every rank that arrived has read it, or `limit` passed.
void acknowledge_seat_problem(Store& store);
void linger_until_seen(Store& store, std::chrono::milliseconds limit);

}  // namespace cohort
