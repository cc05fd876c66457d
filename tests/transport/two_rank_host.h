// two_rank_host.h: the shared-memory arena of a two-rank host, each rank
// mapped from a thread of this process (set_up waits for the other
// through one store), for the tests of shared-memory links.
#pragma once

#include <future>
#include <memory>
#include <vector>

#include "cohort/hash_store.h"
#include "common/cpu_binding.h"
#include "transport/shm/arena.h"

namespace cohort {

// map_two_rank_arena fills arenas[0] and arenas[1]; on failure it returns
// the first rank's error (kBackendError: no shared memory to map here).
inline Status map_two_rank_arena(std::shared_ptr<shm::Arena> arenas[2]) {
  HashStore store;
  const std::vector<int> ranks{0, 1};
  const Deadline deadline = Deadline::after(std::chrono::milliseconds(20000));
  // Both threads may run on this thread's CPUs: one of them, and they take turns.
  const bool outnumbered = ranks.size() > affinity_of_this_thread().size();
  auto second =
      std::async(std::launch::async, [&] { return shm::Arena::set_up(store, 1, ranks, outnumbered, deadline); });
  auto first = shm::Arena::set_up(store, 0, ranks, outnumbered, deadline);
  auto other = second.get();
  for (const Status& st : {first.status(), other.status()}) {
    if (!st.ok()) return st;
  }
  arenas[0] = std::move(first.value());
  arenas[1] = std::move(other.value());
  return Status::ok_status();
}

}  // namespace cohort
