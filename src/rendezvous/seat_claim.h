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
#include "common/deadline.h"
#include "common/hmac.h"
#include "common/status.h"

namespace cohort {

// describe_this_process names this process for a person: "pid 123 on host
// h" and " of job J" when COHORT_JOB_ID (or torch's TORCHELASTIC_RUN_ID)
// names one.
std::string describe_this_process();

// claim_seat records that this process is rank `rank` of `size` (keys
// under "seat/" of `store`) and returns the group's nonce: random, made by
// the first rank to claim, the same for every rank of the group, so the
// data plane can tell its peers from any process that did not join through
// this store. Ranks other than 0 first wait for rank 0's claim (its job
// and world size are the group's) until `deadline`: kTimeout "rank 0
// never arrived". Fails with InvalidArgument when rank 0 belongs to
// another job (COHORT_JOB_ID), naming both jobs; when rank 0 said another
// world size, naming both sizes; or when another process (another pid or
// host) holds the seat already, naming both. Each refusal but one leaves
// the reason where seat_problem finds it: a rank of another job is refused
// alone, since the job it reached is not at fault.
Result<Digest> claim_seat(Store& store, int rank, int size, Deadline deadline);

// seat_problem is the reason a claim failed in this group, if one did:
// the ranks still waiting for their peers' addresses fail with it instead
// of waiting out their timeout.
std::optional<std::string> seat_problem(Store& store);

// acknowledge_seat_problem tells the refused rank that this one has read
// the reason; linger_until_seen (claim_seat's, when it refuses) keeps a
// refused rank (which may host the store) until every rank that arrived
// has read it, or `limit` passed.
void acknowledge_seat_problem(Store& store);
void linger_until_seen(Store& store, std::chrono::milliseconds limit);

}  // namespace cohort
