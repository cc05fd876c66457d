// cost_model.h: what a collective's steps cost on the links a group has.
//
// The algorithm table (selection.h) prices each registered algorithm
// (registry.h) with these numbers and takes the cheapest. A message costs
// a fixed latency plus its bytes over the link's rate; reducing and
// copying cost their bytes over the memory's rates. The defaults are in
// cost_model.cc, with where they come from; COHORT_COST_TCP_US and
// COHORT_LINK_GBITS set the network's for a real cluster.
#pragma once

#include <string>

namespace cohort {

// Topology is where a group's ranks are, as far as the table cares.
enum class Topology {
  kNetwork,  // no two ranks share memory
  kOneHost,  // every rank on one host, sharing memory
  kHosts,    // several hosts, some with more than one rank sharing memory
};

// GroupShape is what the cost of an algorithm depends on besides the size.
struct GroupShape {
  int ranks = 1;
  int hosts = 1;          // ranks that share no memory count as hosts of their own
  int most_per_host = 1;  // the most ranks on one host
  Topology topology = Topology::kNetwork;

  // flat is P ranks that share no memory.
  static GroupShape flat(int ranks) { return GroupShape{ranks, ranks, 1, Topology::kNetwork}; }
  // of is `ranks` ranks on `hosts` hosts (evenly, as far as they go), with
  // shared memory within a host.
  static GroupShape of(int ranks, int hosts);
  // between_hosts is the group a hierarchical collective's step between
  // hosts runs in: one rank a host, each host's link shared by `sharing`
  // such groups at once (1 for all_reduce's leaders; a host's ranks for
  // the columns of all_gather and reduce_scatter, which all run at once).
  static GroupShape between_hosts(int hosts, int sharing) {
    return GroupShape{hosts, hosts, sharing, Topology::kNetwork};
  }
  // hosts_hold_equal_ranks: several hosts, each with most_per_host (two or
  // more) of the ranks.
  bool hosts_hold_equal_ranks() const {
    return hosts >= 2 && most_per_host >= 2 && ranks == hosts * most_per_host;
  }
  std::string describe() const;  // "32 ranks on 8 hosts (4 a host)"
};

// LinkCost: one message's fixed cost and the link's rate.
struct LinkCost {
  double latency_s;
  double bytes_per_s;
  double seconds(double bytes) const { return latency_s + bytes / bytes_per_s; }
};

struct CostModel {
  LinkCost network;           // TCP between hosts
  LinkCost shm_messages;      // the message-passing transport within a host (rings)
  LinkCost shm_direct;        // a direct shared-memory step (flags and slots)
  double reduce_bytes_per_s;  // reducing one buffer into another, cache-resident
  double copy_bytes_per_s;    // memcpy
  double message_s;           // a rank's own work for each message it posts (many posted at once)

  // from_config: the defaults, with COHORT_COST_TCP_US and
  // COHORT_LINK_GBITS (or COHORT_COST_TCP_GBITS) applied.
  static CostModel from_config();
  // messages: the link a flat message-passing algorithm sees in `shape`:
  // the rings within one host; else the network, whose link a host's
  // ranks share.
  LinkCost messages(const GroupShape& shape) const {
    if (shape.topology == Topology::kOneHost) return shm_messages;
    return LinkCost{network.latency_s, network.bytes_per_s / shape.most_per_host};
  }
  double reduce_s(double bytes) const { return bytes / reduce_bytes_per_s; }
  double copy_s(double bytes) const { return bytes / copy_bytes_per_s; }
};

}  // namespace cohort
