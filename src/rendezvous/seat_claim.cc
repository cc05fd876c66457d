#include "rendezvous/seat_claim.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "cohort/errors.h"
#include "common/config_registry.h"

namespace cohort {
namespace {

const char kRankZeroKey[] = "seat/rank0";  // "<job id>\n<world size>\n<process>" of rank 0
const char kNonceKey[] = "seat/nonce";     // the group's nonce, made by the first claimant
const char kProblemKey[] = "seat/problem";
const char kArrivalsKey[] = "seat/arrivals";  // processes that began a claim
const char kRefusedKey[] = "seat/refused";    // of them, refused
const char kSeenKey[] = "seat/problem_seen";  // of the others, those that read why

// job_id is this process's job, "" for one started by hand (torchrun's
// static rendezvous writes "none").
std::string job_id() {
  std::string job = config_string(knobs::kJobId);
  return job == "none" ? std::string() : job;
}

std::string job_text(const std::string& job) {
  return job.empty() ? std::string("no job id (started by hand)") : "job " + job;
}

// refuse publishes why this rank cannot join, so that every rank waiting
// fails with it, and stays until they read it: this rank may host the
// store.
Status refuse(Store& store, const std::string& why) {
  store.add(kRefusedKey, 1);
  store.set(kProblemKey, to_bytes(why));
  linger_until_seen(store, std::chrono::seconds(5));
  return Status(StatusCode::kInvalidArgument, why);
}

// check_rank0 compares this rank's job and world size with rank 0's, which
// every other rank waits for (1 s at a time, so that a refusal ends the
// wait): the group is the one whose rank 0 holds seat 0. A rank of another
// job is refused alone, publishing nothing, so that a stranger cannot stop
// the job it stumbled into (whatever world size it says); a rank of this
// job that says another world size is refused for all to read, since the
// job cannot run; a second rank 0 of another job or size is refused as any
// second claimant, which stops both.
Status check_rank0(Store& store, int rank, int size, Deadline deadline) {
  const std::string mine = job_id() + "\n" + std::to_string(size) + "\n" + describe_this_process();
  std::string held;
  if (rank == 0) {
    held = to_string(store.compare_set(kRankZeroKey, {}, to_bytes(mine)));
  } else {
    for (;;) {
      try {
        store.wait({kRankZeroKey}, deadline.slice(std::chrono::milliseconds(1000)));
        held = to_string(store.get(kRankZeroKey));
        break;
      } catch (const TimeoutError&) {
        if (auto problem = seat_problem(store)) {
          acknowledge_seat_problem(store);
          return invalid_argument("rank " + std::to_string(rank) + " cannot join: " + *problem);
        }
        if (deadline.expired()) return timeout_error("rank 0 never arrived");
      }
    }
  }
  const size_t cut1 = held.find('\n');
  const size_t cut2 = cut1 == std::string::npos ? cut1 : held.find('\n', cut1 + 1);
  if (cut2 == std::string::npos) return Status::ok_status();
  const std::string their_job = held.substr(0, cut1);
  const std::string their_size = held.substr(cut1 + 1, cut2 - cut1 - 1);
  const std::string who = held.substr(cut2 + 1);
  if (their_job != job_id()) {
    const std::string why = "rank " + std::to_string(rank) + " (" + describe_this_process() + ") is of " +
                            job_text(job_id()) + ", but rank 0 of the group in this store (" + who +
                            ") is of " + job_text(their_job) +
                            ": two jobs on one store (give each job its own MASTER_PORT)";
    if (rank == 0) return refuse(store, why);
    store.add(kRefusedKey, 1);
    return invalid_argument(why);
  }
  if (their_size != std::to_string(size)) {
    return refuse(store, "rank " + std::to_string(rank) + " says world_size " + std::to_string(size) +
                             ", rank 0 says " + their_size + " (give every rank the same WORLD_SIZE)");
  }
  return Status::ok_status();
}

}  // namespace

std::string describe_this_process() {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  std::string id = "pid " + std::to_string(getpid()) + " on host " + host;
  const std::string job = job_id();
  if (!job.empty()) id += " of job " + job;
  return id;
}

Result<Digest> claim_seat(Store& store, int rank, int size, Deadline deadline) {
  try {
    store.add(kArrivalsKey, 1);
    Status against_rank0 = check_rank0(store, rank, size, deadline);
    if (!against_rank0.ok()) return against_rank0;
    // Claims are numbered; the first claimant holds the seat.
    const std::string seat = "seat/" + std::to_string(rank);
    const std::string me = describe_this_process();
    const int64_t claim = store.add(seat + "/claims", 1);
    store.set(seat + "/by/" + std::to_string(claim), to_bytes(me));
    if (claim > 1) {
      const std::string first = to_string(store.get(seat + "/by/1"));
      // The same process making the group again (a test, a rebuilt group)
      // is no second claimant.
      if (first != me) {
        return refuse(store, "rank " + std::to_string(rank) + " joined twice: " + first + " and " + me +
                                 " (a RANK given twice, or a process of another job on this job's "
                                 "MASTER_PORT)");
      }
    }
    const Digest fresh = random_nonce();
    const Bytes held_nonce = store.compare_set(kNonceKey, {}, Bytes(fresh.begin(), fresh.end()));
    Digest nonce{};
    if (held_nonce.size() != nonce.size()) {
      return Status(StatusCode::kStoreError, "the group's nonce in the store has " +
                                                 std::to_string(held_nonce.size()) + " bytes, not " +
                                                 std::to_string(nonce.size()));
    }
    std::copy(held_nonce.begin(), held_nonce.end(), nonce.begin());
    return nonce;
  } catch (const Error& e) {
    return Status(StatusCode::kStoreError,
                  std::string("claiming the seat of rank ") + std::to_string(rank) + ": " + e.what());
  }
}

std::optional<std::string> seat_problem(Store& store) {
  try {
    if (!store.check({kProblemKey})) return std::nullopt;
    return to_string(store.get(kProblemKey));
  } catch (const Error&) {
    return std::nullopt;
  }
}

void acknowledge_seat_problem(Store& store) {
  try {
    store.add(kSeenKey, 1);
  } catch (const Error&) {
    // The refused rank waits a bounded time in any case.
  }
}

void linger_until_seen(Store& store, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  try {
    if (!store.check({kProblemKey})) return;  // refused alone: nobody waits for word
    while (std::chrono::steady_clock::now() < until) {
      const int64_t others = store.add(kArrivalsKey, 0) - store.add(kRefusedKey, 0);
      if (store.add(kSeenKey, 0) >= others) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const Error&) {
    // The store went away: nobody is left to tell.
  }
}

}  // namespace cohort
