#include "rendezvous/seat_claim.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "cohort/errors.h"

namespace cohort {
namespace {

const char kWorldSizeKey[] = "seat/world_size";
const char kProblemKey[] = "seat/problem";
const char kArrivalsKey[] = "seat/arrivals";  // processes that began a claim
const char kRefusedKey[] = "seat/refused";    // of them, refused
const char kSeenKey[] = "seat/problem_seen";  // of the others, those that read why

// identity names this process for a person: "pid 123 on host h" (and the
// launcher's job id when one was given).
std::string identity() {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  std::string id = "pid " + std::to_string(getpid()) + " on host " + host;
  const char* job = std::getenv("TORCHELASTIC_RUN_ID");
  if (job && *job && std::string(job) != "none") id += std::string(" of job ") + job;
  return id;
}

Status refuse(Store& store, const std::string& why) {
  store.add(kRefusedKey, 1);
  store.set(kProblemKey, to_bytes(why));
  return Status(StatusCode::kInvalidArgument, why);
}

}  // namespace

Status claim_seat(Store& store, int rank, int size) {
  try {
    store.add(kArrivalsKey, 1);
    // The first rank to arrive states the world size; the others compare.
    const std::string mine = std::to_string(size) + " " + std::to_string(rank);
    const std::string held = to_string(store.compare_set(kWorldSizeKey, {}, to_bytes(mine)));
    int held_size = 0, held_rank = 0;
    if (std::sscanf(held.c_str(), "%d %d", &held_size, &held_rank) == 2 && held_size != size) {
      return refuse(store, "rank " + std::to_string(rank) + " says world_size " + std::to_string(size) +
                               ", rank " + std::to_string(held_rank) + " says " + std::to_string(held_size) +
                               " (give every rank the same WORLD_SIZE)");
    }
    // Claims are numbered; the first claimant holds the seat.
    const std::string seat = "seat/" + std::to_string(rank);
    const std::string me = identity();
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
    return Status::ok_status();
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
