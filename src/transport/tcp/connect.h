// connect.h (tcp): building a group's mesh of connections via a store.
//
// Every rank listens on an address of its own (see local_address), publishes
// it under "tcp/addr/<rank>", and waits for everyone's (join_mesh). Then
// each rank connects to every wanted lower rank (sending a hello with its
// rank) and accepts one connection from every wanted higher rank
// (connect_wanted): the peers on this host's shared memory are not wanted.
// The listen backlog holds connections until they are accepted, so this
// order cannot deadlock. With COHORT_TCP_CONNECT=lazy it stops after the
// addresses: each pair connects on its first message (link.h, acceptor.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cohort/store.h"
#include "common/deadline.h"
#include "common/socket.h"
#include "transport/link.h"
#include "transport/rank_place.h"
#include "transport/tcp/hello.h"

namespace cohort::tcp {

// local_address picks the address to listen on and publish:
// COHORT_SOCKET_IFNAME's address when set; else the source address of the
// route to `peer_host` (MASTER_ADDR), so that a multi-host job does not
// publish loopback by accident; else 127.0.0.1 when there is no peer host.
Result<std::string> local_address(const std::string& peer_host);

// A group's TCP mesh, joined and maybe connected.
struct Mesh {
  std::vector<Socket> sockets;         // eager: sockets[q] is connected to peer q
  std::vector<std::string> addresses;  // every rank's, as published
  // places[q]: where rank q runs (rank_place.h), published with its
  // address: one record a rank, so the places cost the join no round trip.
  std::vector<RankPlace> places;
  // wanted[q]: q is reached over TCP (false for this rank and for peers
  // reached another way, such as this host's shared memory). Both ends of
  // a pair must agree: each rank computes it from what all published.
  std::vector<bool> wanted;
  Socket listener;               // until connected; lazy: where the peers connect
  GroupCredentials credentials;  // what hellos show and expect
  bool lazy = false;
};

// join_mesh listens, claims `rank`'s seat in a group of `size` through
// `store` (already namespaced for the group), publishes its address and
// waits for every rank's: no connection yet, every peer wanted. Fails with
// kTimeout listing the ranks that never published an address by
// `deadline`.
Result<Mesh> join_mesh(Store& store, int rank, int size, const std::string& address, Deadline deadline);

// connect_wanted connects `rank` to every peer mesh.wanted marks, or, when
// `lazy`, to none (each pair connects on its first message: link.h,
// acceptor.h). Fails with kTimeout listing the ranks that never connected
// by `deadline`.
Status connect_wanted(Mesh& mesh, int rank, Deadline deadline, bool lazy);

// connect_mesh is join_mesh, then connect_wanted to every peer. With
// allow_lazy false the mesh is connected now even under
// COHORT_TCP_CONNECT=lazy (RPC's wire has no acceptor).
Result<Mesh> connect_mesh(Store& store, int rank, int size, const std::string& address, Deadline deadline,
                          bool allow_lazy = true);

// TcpLinks are a group's links over TCP alone, and the acceptor of a lazy
// group.
struct TcpLinks {
  std::vector<std::unique_ptr<Link>> links;  // null at this rank's own index
  std::unique_ptr<Acceptor> acceptor;
};
// make_links turns a mesh into links: one per connected socket, or, when
// lazy, one per wanted peer with their acceptor.
TcpLinks make_links(Mesh mesh, int rank);

}  // namespace cohort::tcp
