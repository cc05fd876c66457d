#include "transport/connect_group.h"

#include "common/config_registry.h"
#include "common/logging.h"
#include "transport/engine.h"
#include "transport/shm/connect.h"
#include "transport/shm/link.h"
#include "transport/tcp/connect.h"

namespace cohort {

Result<ConnectedLinks> connect_links(Store& store, int rank, const std::vector<int>& global_ranks,
                                     const std::string& address, Deadline deadline, bool with_shared_memory,
                                     bool allow_lazy) {
  const int size = static_cast<int>(global_ranks.size());
  // Joined first (seat claimed, addresses known), so that a second process
  // holding this rank is refused before it touches the host's memory.
  auto mesh = tcp::join_mesh(store, rank, size, address, deadline);
  if (!mesh.ok()) return mesh.status();
  ConnectedLinks group;
  EngineOptions& options = group.options;
  options.link_bytes_per_second = static_cast<uint64_t>(config_float(knobs::kLinkGbits) * 1e9 / 8);
  const bool shared_memory = with_shared_memory && config_string(knobs::kShm) != "off" && size > 1;
  if (shared_memory) {
    auto leaders = shm::host_leaders(store, rank, global_ranks, deadline);
    if (!leaders.ok()) return leaders.status();
    options.host_of = leaders.value();
    auto arena = shm::connect_host(store, rank, leaders.value(), deadline);
    if (!arena.ok()) return arena.status();
    group.arena = arena.value();
  }
  // The host's peers are reached through its shared memory alone: no TCP
  // connection between them (at 128 ranks on a host, 8128 fewer).
  std::vector<std::unique_ptr<Link>> shm_links(static_cast<size_t>(size));
  for (int q = 0; q < size; ++q) {
    if (q == rank) continue;
    const int local = group.arena ? group.arena->local_index_of(q) : -1;
    std::string peer_name = "rank " + std::to_string(q) + " (" + mesh.value().addresses[q] + ")";
    COHORT_LOG(kDebug) << "rank " << rank << " talks to " << peer_name << " over "
                       << (local >= 0 ? "shared memory" : "TCP");
    if (local < 0) continue;
    mesh.value().wanted[q] = false;
    shm_links[q] = std::make_unique<shm::ShmLink>(group.arena, local, mesh.value().addresses[q],
                                                  std::move(peer_name));
  }
  if (group.arena) {
    options.spin_bare = !group.arena->oversubscribed();
    options.doorbell_fd = group.arena->signals().wake_fd();
  }
  const bool lazy = allow_lazy && config_string(knobs::kTcpConnect) == "lazy";
  Status connected = tcp::connect_wanted(mesh.value(), rank, deadline, lazy);
  if (!connected.ok()) return connected;
  tcp::TcpLinks tcp_links = tcp::make_links(std::move(mesh.value()), rank);
  for (int q = 0; q < size; ++q) {
    if (shm_links[q]) tcp_links.links[q] = std::move(shm_links[q]);
  }
  group.links = std::move(tcp_links.links);
  group.acceptor = std::move(tcp_links.acceptor);
  return group;
}

Result<ConnectedGroup> connect_group(Store& store, int rank, const std::vector<int>& global_ranks,
                                     const std::string& address, Deadline deadline, bool with_shared_memory) {
  auto links = connect_links(store, rank, global_ranks, address, deadline, with_shared_memory, true);
  if (!links.ok()) return links.status();
  ConnectedLinks& l = links.value();
  ConnectedGroup group;
  group.arena = l.arena;
  group.transport = std::make_unique<Engine>(rank, static_cast<int>(global_ranks.size()), std::move(l.links),
                                             std::move(l.acceptor), std::move(l.options));
  return group;
}

}  // namespace cohort
