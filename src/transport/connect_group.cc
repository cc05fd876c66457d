#include "transport/connect_group.h"

#include "common/config_registry.h"
#include "transport/engine.h"
#include "transport/link_kinds.h"
#include "transport/rank_place.h"
#include "transport/shm/link_kind.h"
#include "transport/tcp/link_kind.h"

namespace cohort {

std::string PeerKinds::describe() const {
  std::string text;
  for (const std::string& kind : tried) {
    std::string ranks;
    for (size_t q = 0; q < of_peer.size(); ++q) {
      if (of_peer[q] == kind) ranks += (ranks.empty() ? "" : ", ") + std::to_string(q);
    }
    text += (text.empty() ? "" : ", ") + kind + " with ranks [" + ranks + "]";
  }
  return text;
}

Result<ConnectedLinks> connect_links(Store& store, int rank, const std::vector<int>& global_ranks,
                                     const std::string& address, Deadline deadline, bool with_shared_memory,
                                     bool allow_lazy) {
  const int size = static_cast<int>(global_ranks.size());
  // Joined first (seat claimed, addresses known), so that a second process
  // holding this rank is refused before it touches the host's memory.
  auto mesh = tcp::join_mesh(store, rank, size, address, deadline);
  if (!mesh.ok()) return mesh.status();
  const std::vector<std::string> addresses = mesh.value().addresses;
  const std::vector<RankPlace> places = mesh.value().places;
  ConnectedLinks group;
  group.options.link_bytes_per_second = static_cast<uint64_t>(config_float(knobs::kLinkGbits) * 1e9 / 8);
  group.options.ranks_per_cpu = ranks_per_cpu(places);
  // The kinds in the order they are tried: the host's peers are reached
  // through its shared memory alone, with no TCP connection between them
  // (at 128 ranks on a host, 8128 fewer).
  std::vector<std::unique_ptr<LinkKind>> kinds;
  const bool shared_memory = with_shared_memory && config_string(knobs::kShm) != "off" && size > 1;
  if (shared_memory) kinds.push_back(shm::shm_link_kind());
  const bool lazy = allow_lazy && config_string(knobs::kTcpConnect) == "lazy";
  kinds.push_back(tcp::tcp_link_kind(std::move(mesh.value()), lazy));
  const GroupMeeting meeting{store, rank, global_ranks, addresses, places, deadline};
  Status connected = connect_by_kinds(meeting, kinds, group);
  if (!connected.ok()) return connected;
  return group;
}

Result<ConnectedGroup> connect_group(Store& store, int rank, const std::vector<int>& global_ranks,
                                     const std::string& address, Deadline deadline, bool with_shared_memory) {
  auto links = connect_links(store, rank, global_ranks, address, deadline, with_shared_memory, true);
  if (!links.ok()) return links.status();
  ConnectedLinks& l = links.value();
  ConnectedGroup group;
  group.arena = l.arena;
  group.kinds = l.kinds;
  group.transport = std::make_unique<Engine>(rank, static_cast<int>(global_ranks.size()), std::move(l.links),
                                             std::move(l.acceptor), std::move(l.options));
  return group;
}

}  // namespace cohort
