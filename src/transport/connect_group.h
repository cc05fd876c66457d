// connect_group.h: a group's transport, assembled: the ranks join the TCP
// mesh (tcp/connect.h, the rank's seat and every address), then the kinds
// of link are tried in order for each peer (link_kinds.h: this host's
// shared memory for the peers that share it, TCP for the rest), and the
// engine runs over their links (engine.h). The one place that lists the
// kinds; neither tcp/ nor shm/ includes the other.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cohort/store.h"
#include "common/deadline.h"
#include "transport/engine.h"
#include "transport/link.h"
#include "transport/transport.h"

namespace cohort {
namespace shm {
class Arena;
}

// PeerKinds: which kind of link reaches each peer, as the list of kinds
// chose (link_kinds.h), kept for whoever describes the group's links.
struct PeerKinds {
  std::vector<std::string> tried;    // every kind's name, in the order tried
  std::vector<std::string> of_peer;  // of_peer[q]: the kind that reaches q; "" for this rank
  // describe: each kind tried and the peers it reaches, "shared memory
  // with ranks [1], TCP with ranks [2, 3]" (a kind that reaches none: []).
  std::string describe() const;
};

struct ConnectedGroup {
  std::unique_ptr<Transport> transport;
  // The host's shared memory when other ranks of the group are here, for
  // the direct algorithms and symmetric memory; null otherwise. Its rings
  // carry those ranks' messages, so the transport holds it too.
  std::shared_ptr<shm::Arena> arena;
  PeerKinds kinds;
};

// ConnectedLinks are a group's links before an engine takes them: RPC's
// wire (transport/wire.h) drives them itself.
struct ConnectedLinks {
  std::vector<std::unique_ptr<Link>> links;  // null at this rank's index
  PeerKinds kinds;  // which kind reaches each peer
  std::unique_ptr<Acceptor> acceptor;        // lazy TCP only
  EngineOptions options;
  std::shared_ptr<shm::Arena> arena;
};

// connect_links makes the links of connect_group (below); with allow_lazy
// false every TCP link is connected now, whatever COHORT_TCP_CONNECT says.
Result<ConnectedLinks> connect_links(Store& store, int rank, const std::vector<int>& global_ranks,
                                     const std::string& address, Deadline deadline, bool with_shared_memory,
                                     bool allow_lazy);

// connect_group connects group rank `rank` (global_ranks: the group's
// ranks in the job, for COHORT_SHM_RANKS_PER_HOST) to every other rank
// through `store` (namespaced for the group), listening on `address`.
// Shared memory between ranks of one host unless `with_shared_memory` is
// false or COHORT_SHM is off; those ranks have no TCP connection between
// them. Lazy connections (COHORT_TCP_CONNECT) are for the other hosts.
Result<ConnectedGroup> connect_group(Store& store, int rank, const std::vector<int>& global_ranks,
                                     const std::string& address, Deadline deadline,
                                     bool with_shared_memory = true);

}  // namespace cohort
