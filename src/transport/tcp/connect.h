// connect.h (tcp): building a group's full mesh of connections via a store.
//
// Every rank listens on an address of its own (see local_address), publishes
// it under "tcp/addr/<rank>", and waits for everyone's. Then each rank
// connects to every lower rank (sending a hello with its rank) and accepts
// one connection from every higher rank. The listen backlog holds
// connections until they are accepted, so this order cannot deadlock. With
// COHORT_TCP_CONNECT=lazy it stops after the addresses: each pair connects
// on its first message (link.h, acceptor.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cohort/store.h"
#include "common/deadline.h"
#include "common/socket.h"
#include "transport/link.h"
#include "transport/tcp/hello.h"

namespace cohort::tcp {

// local_address picks the address to listen on and publish:
// COHORT_SOCKET_IFNAME's address when set; else the source address of the
// route to `peer_host` (MASTER_ADDR), so that a multi-host job does not
// publish loopback by accident; else 127.0.0.1 when there is no peer host.
Result<std::string> local_address(const std::string& peer_host);

// connect_mesh connects `rank` to every other rank of a group of `size`
// through `store` (already namespaced for the group). Fails with kTimeout
// listing the ranks that never published an address, or that never
// connected, by `deadline`.
struct Mesh {
  std::vector<Socket> sockets;         // eager: sockets[q] is connected to peer q
  std::vector<std::string> addresses;  // every rank's, as published
  Socket listener;                     // lazy: where the peers connect
  GroupCredentials credentials;        // what hellos show and expect
  bool lazy = false;
};
// With allow_lazy false the mesh is connected now even under
// COHORT_TCP_CONNECT=lazy (RPC's wire has no acceptor).
Result<Mesh> connect_mesh(Store& store, int rank, int size, const std::string& address, Deadline deadline,
                          bool allow_lazy = true);

// TcpLinks are a group's links over TCP alone, and the acceptor of a lazy
// group.
struct TcpLinks {
  std::vector<std::unique_ptr<Link>> links;  // null at this rank's own index
  std::unique_ptr<Acceptor> acceptor;
};
// make_links turns a mesh into links: one per connected socket (a socket
// that another link took is skipped), or lazy ones with their acceptor.
TcpLinks make_links(Mesh mesh, int rank);

}  // namespace cohort::tcp
