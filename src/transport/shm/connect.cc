#include "transport/shm/connect.h"

#include <algorithm>

#include "cohort/errors.h"
#include "common/config_registry.h"
#include "common/logging.h"
#include "transport/shm/host_identity.h"

namespace cohort::shm {

Result<std::vector<int>> host_leaders(Store& store, int rank, const std::vector<int>& global_ranks,
                                      Deadline deadline) {
  const int size = static_cast<int>(global_ranks.size());
  std::string mine = host_identity();
  const int64_t per_host = config_int(knobs::kShmRanksPerHost);
  auto identity_of = [&](int group_rank) {
    if (per_host <= 0) return std::string();
    return " pretend-host=" + std::to_string(global_ranks[static_cast<size_t>(group_rank)] / per_host);
  };
  std::vector<std::string> keys;
  for (int q = 0; q < size; ++q) keys.push_back("shm/host/" + std::to_string(q));
  std::vector<Bytes> identities;
  try {
    store.set(keys[static_cast<size_t>(rank)], to_bytes(mine + identity_of(rank)));
    store.wait(keys, deadline.as_timeout());
    identities = store.multi_get(keys);
  } catch (const TimeoutError& e) {
    return timeout_error(std::string("exchanging host identities: ") + e.what());
  } catch (const Error& e) {
    return Status(StatusCode::kStoreError, std::string("exchanging host identities: ") + e.what());
  }
  std::vector<int> leader(static_cast<size_t>(size));
  for (int q = 0; q < size; ++q) {
    leader[static_cast<size_t>(q)] = q;
    for (int first = 0; first < q; ++first) {
      if (identities[static_cast<size_t>(first)] == identities[static_cast<size_t>(q)]) {
        leader[static_cast<size_t>(q)] = first;
        break;
      }
    }
  }
  return leader;
}

Result<std::shared_ptr<Arena>> connect_host(Store& store, int rank, const std::vector<int>& leaders,
                                            Deadline deadline) {
  std::vector<int> local;
  for (int q = 0; q < static_cast<int>(leaders.size()); ++q) {
    if (leaders[static_cast<size_t>(q)] == leaders[static_cast<size_t>(rank)]) local.push_back(q);
  }
  if (local.size() < 2) return std::shared_ptr<Arena>();
  auto arena = Arena::set_up(store, rank, local, deadline);
  if (!arena.ok()) {
    // Only a failure every local rank agrees on (kBackendError: the
    // segment, a doorbell or a pidfd) falls back to TCP: the host's ranks
    // then all connect. A store failure or timeout may hit one rank alone,
    // which would then wait for connections its peers never make.
    if (arena.status().code() != StatusCode::kBackendError) return arena.status();
    COHORT_LOG(kWarning) << "rank " << rank << ": shared memory is unavailable, using TCP on this host: "
                         << arena.status().message();
    return std::shared_ptr<Arena>();
  }
  return std::shared_ptr<Arena>(std::move(arena.value()));
}

}  // namespace cohort::shm
