// cost_model.h: what a collective's steps cost on the links a group has.
//
// The algorithm table (selection.h) prices each registered algorithm
// (registry.h) with these numbers and takes the cheapest. A message costs
// a fixed latency plus its bytes over the link's rate; reducing and
// copying cost their bytes over the memory's rates. The defaults are in
// cost_model.cc, with where they come from; COHORT_COST_TCP_US and
// COHORT_LINK_GBITS set the network's for a real cluster.
#pragma once

#include <algorithm>
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
  // ranks_per_cpu: the most ranks one machine runs per CPU they may use
  // (Transport::ranks_per_cpu; 1: each rank a CPU of its own), whether or
  // not they share memory: sixteen ranks over loopback TCP on two cores
  // are eight to a core.
  double ranks_per_cpu = 1.0;

  // flat is P ranks that share no memory.
  static GroupShape flat(int ranks) { return GroupShape{ranks, ranks, 1, Topology::kNetwork}; }
  // of is `ranks` ranks on `hosts` hosts (evenly, as far as they go), with
  // shared memory within a host.
  static GroupShape of(int ranks, int hosts);
  // between_hosts is the group a hierarchical collective's step between
  // hosts runs in: one rank a host, each host's link shared by `sharing`
  // such groups at once (1 for all_reduce's leaders; a host's ranks for
  // the columns of all_gather and reduce_scatter, which all run at once).
  static GroupShape between_hosts(int hosts, int sharing, double ranks_per_cpu = 1.0) {
    return GroupShape{hosts, hosts, sharing, Topology::kNetwork, ranks_per_cpu};
  }
  // leaders: the group of a hierarchical all_reduce's step between hosts
  // (one rank a host, as crowded as they are between them); columns: each
  // column's group of a hierarchical all_gather and reduce_scatter, every
  // column of a host at once (as crowded as this group).
  GroupShape leaders() const {
    return between_hosts(hosts, 1, ranks_per_cpu * hosts / std::max(1, ranks));
  }
  GroupShape columns() const { return between_hosts(hosts, most_per_host, ranks_per_cpu); }
  // hosts_hold_equal_ranks: several hosts, each with most_per_host (two or
  // more) of the ranks.
  bool hosts_hold_equal_ranks() const {
    return hosts >= 2 && most_per_host >= 2 && ranks == hosts * most_per_host;
  }
  std::string describe() const;  // "32 ranks on 8 hosts (4 a host)", ", 8 a CPU" when crowded
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
  // What a crowded machine's ranks pay (on_crowded_machine), measured on
  // loopback TCP: a message's system call and the kernel's stack for it,
  // and a step that waits for a message (the wake-up, a send and a
  // receive), each in one rank's CPU time.
  double crowded_message_s;
  double crowded_step_s;

  // on_crowded_machine: the model as a rank sees it where its machine runs
  // `ranks_per_cpu` ranks a CPU (above 1): each part of a rank's own work
  // (posting a message, reducing, copying) waits for its share of a CPU,
  // so takes that many times as long, a message at least
  // crowded_message_s; and a step that waits for a message costs at least
  // that many times crowded_step_s, the machine's CPUs running every
  // rank's step in turn. The links' rates stay: divided too, they priced
  // bytes far above what they cost at 16 ranks on 2 cores, and put the
  // halving-doubling all_reduce (half the bytes of recursive doubling in
  // twice the steps) ahead from 16 KiB, where it was 1.45x slower (1428
  // against 984 us). At 16 ranks on 2 cores the model prices Bruck's all_to_all of
  // 4 B at 300 us and pairwise's at 555, as measured (300 and 563:
  // docs/performance.md); at 1 it is this model unchanged.
  CostModel on_crowded_machine(double ranks_per_cpu) const;

  double reduce_s(double bytes) const { return bytes / reduce_bytes_per_s; }
  double copy_s(double bytes) const { return bytes / copy_bytes_per_s; }
};

}  // namespace cohort
