#include "transport/shm/connect.h"

#include <algorithm>
#include <map>
#include <string>
#include <thread>

#include "cohort/errors.h"
#include "common/config_registry.h"
#include "common/cpu_binding.h"
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
                                            const std::vector<RankPlace>& places, Deadline deadline) {
  std::vector<int> local;
  for (int q = 0; q < static_cast<int>(leaders.size()); ++q) {
    if (leaders[static_cast<size_t>(q)] == leaders[static_cast<size_t>(rank)]) local.push_back(q);
  }
  if (local.size() < 2) return std::shared_ptr<Arena>();
  // Ranks that outnumber the CPUs they may use between them take turns on
  // one: their waits must yield it from the start.
  const std::vector<int> cpus = cpus_of_ranks(places, local);
  const bool outnumbered = local.size() > (cpus.empty() ? std::max(1u, std::thread::hardware_concurrency())
                                                        : cpus.size());
  if (outnumbered && rank == local.front()) {
    COHORT_LOG(kInfo) << "the " << local.size() << " ranks of this host may run on "
                      << (cpus.empty() ? std::string("fewer CPUs") : "CPUs " + cpu_list_text(cpus))
                      << " only: waits on shared memory yield the CPU from the start";
  }
  auto arena = Arena::set_up(store, rank, local, outnumbered, deadline);
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
