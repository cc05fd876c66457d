#include "transport/shm/connect.h"

#include <algorithm>
#include <map>
#include <string>

#include "cohort/errors.h"
#include "common/config_registry.h"
#include "common/logging.h"

namespace cohort::shm {

std::vector<int> host_leaders(const std::vector<RankPlace>& places, const std::vector<int>& global_ranks) {
  const int size = static_cast<int>(global_ranks.size());
  const int64_t per_host = config_int(knobs::kShmRanksPerHost);
  // A rank whose host is unknown (an empty identity) shares with nobody.
  std::map<std::string, int> first_on;
  std::vector<int> leader(static_cast<size_t>(size));
  for (int q = 0; q < size; ++q) {
    std::string host = places[static_cast<size_t>(q)].host;
    if (host.empty()) {
      leader[static_cast<size_t>(q)] = q;
      continue;
    }
    if (per_host > 0) {
      host += " pretend-host=" + std::to_string(global_ranks[static_cast<size_t>(q)] / per_host);
    }
    leader[static_cast<size_t>(q)] = first_on.emplace(host, q).first->second;
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
