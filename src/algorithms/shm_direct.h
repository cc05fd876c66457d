// shm_direct.h: collectives among the ranks of one host, straight through
// shared memory (transport/shm/host_slots.h: the slots and arrival counters
// of the host's arena, nothing of its rings), with no messages at all.
//
// Every rank copies its part into its own slot and counts an arrival; the
// others read it in place once they see the count. Large data goes in
// slot-sized chunks through two slots per rank, so that one chunk is being
// written while the other is read. For all_reduce each rank reduces only
// its own block of every rank's chunk, and everyone then copies the reduced
// blocks out: the memory traffic is close to two copies of the data,
// whatever the number of ranks. Buffers in symmetric memory, which every
// rank maps, skip the slots (all_reduce); large all_gathers may read the
// others' buffers with process_vm_readv.
//
// `local` ranks: indices among the host's ranks. The collective functions below take
// the host's local ranks as their participants (all of the group when
// the group is on one host; the host's part in a hierarchical one).
#pragma once

#include <string>
#include <vector>

#include "algorithms/algorithms.h"
#include "transport/shm/host_slots.h"

namespace cohort {

// shm_all_reduce multiplies the result by `post_scale` (AVG: 1/size) in
// the same pass: each rank scales only its own reduced block, while it is
// still in cache, instead of the caller scaling the whole buffer after.
Status shm_all_reduce(AlgoContext& c, shm::HostSlots& a, const Buffer& buf, ReduceOp::Kind op,
                      double post_scale = 1.0);
// shm_call_facts: what the ways' rules (shm_ways.h) read of a call of
// `bytes` (as the rules count them) on this host.
inline ShmCallFacts shm_call_facts(const shm::HostSlots& a, size_t bytes) {
  return ShmCallFacts{bytes, a.single_copy(), a.single_copy_from(), a.oversubscribed(),
                      a.single_copy_size_told()};
}
// why_shm_way_cannot_run: "" when `way` can run `collective` for `bytes`
// per rank, as the algorithm table counts them, on this host; else why.
std::string why_shm_way_cannot_run(Collective collective, ShmWay way, const shm::HostSlots& a, size_t bytes);

// shm_all_reduce_takes_pieces says whether an all_reduce of `bytes` goes
// through the blocked path, which also takes several buffers at once
// (shm_all_reduce_pieces); smaller ones take one step on one buffer.
bool shm_all_reduce_takes_pieces(size_t bytes);
// shm_all_reduce_pieces reduces the concatenation of `buffers` (one dtype;
// all_reduce_coalesced), each in place, with no packing into one buffer
// first. Only where shm_all_reduce_takes_pieces holds for the total;
// callers pack the buffers into one otherwise. Ranks may split the same
// total differently, and a plain shm_all_reduce of that total (one piece)
// meets it. Where every rank's pieces lie at the same places in symmetric
// memory (cohort/symmetric_memory.h), each rank reduces its block from the
// others' pieces directly and writes it into all of them.
Status shm_all_reduce_pieces(AlgoContext& c, shm::HostSlots& a, const std::vector<Buffer>& buffers,
                             ReduceOp::Kind op, double post_scale);
// shm_reduce leaves the result in local rank `root`'s buffer only.
Status shm_reduce(AlgoContext& c, shm::HostSlots& a, const Buffer& buf, int root, ReduceOp::Kind op);
Status shm_broadcast(AlgoContext& c, shm::HostSlots& a, const Buffer& buf, int root);
Status shm_all_gather(AlgoContext& c, shm::HostSlots& a, const Buffer& input,
                      const std::vector<Buffer>& outputs);
Status shm_reduce_scatter(AlgoContext& c, shm::HostSlots& a, const Buffer& output,
                          const std::vector<Buffer>& inputs, ReduceOp::Kind op);
// shm_all_to_all sends inputs[d] to local rank d and receives outputs[q]
// from local rank q; split sizes may differ between ranks, and sizes that
// do not pair up (what q sends to d against what d expects) fail every
// rank with a desync error naming the pair. Only where
// shm_all_to_all_fits: a slot holds a block per rank (every rank gets the
// same answer).
bool shm_all_to_all_fits(const shm::HostSlots& a);
Status shm_all_to_all(AlgoContext& c, shm::HostSlots& a, const std::vector<Buffer>& outputs,
                      const std::vector<Buffer>& inputs);
Status shm_barrier(AlgoContext& c, shm::HostSlots& a);

// hierarchical_all_reduce reduces within each host (through `slots`, this
// host's shared memory, when there is one), all_reduces among the hosts'
// leaders, and broadcasts within each host (hierarchical.cc). With
// `in_shares` (the table's hierarchical_shares, only where
// hosts_hold_equal_ranks), every local rank carries a share instead
// (all_reduce_in_shares), the few elements left over through the leaders.
Status hierarchical_all_reduce(AlgoContext& c, shm::HostSlots* slots, const Buffer& buf, ReduceOp::Kind op,
                               bool in_shares);
// hierarchical_all_gather and hierarchical_reduce_scatter put every byte
// over the network once: per column of ranks (the same local index on
// every host) over the network, and within each host through `slots`
// (hierarchical_gather_scatter.cc). The flat ring where hosts hold
// different numbers of ranks.
Status hierarchical_all_gather(AlgoContext& c, shm::HostSlots* slots, const Buffer& input,
                               const std::vector<Buffer>& outputs);
Status hierarchical_reduce_scatter(AlgoContext& c, shm::HostSlots* slots, const Buffer& output,
                                   const std::vector<Buffer>& inputs, ReduceOp::Kind op);
// hosts_hold_equal_ranks: at least two hosts, each with the same number
// (at least two) of the group's ranks: the shape the column algorithms need.
bool hosts_hold_equal_ranks(const Transport& t);
// all_reduce_in_shares all_reduces `buf` (its count a multiple of the
// group's size) as a hierarchical reduce_scatter and all_gather of P
// blocks, in place. Only where hosts_hold_equal_ranks.
Status all_reduce_in_shares(AlgoContext& c, shm::HostSlots* slots, const Buffer& buf, ReduceOp::Kind op);

}  // namespace cohort
