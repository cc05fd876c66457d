// dispatch.h: a message-passing algorithm run on one call's buffers.
//
// The one place that maps (collective, algorithm) to the function that
// runs it over a Transport: the backend calls it for every choice that is
// not shared memory's (native_backend.cc), the schedule simulator for
// every rank it traces (schedule_trace.h). Adding a message-passing
// algorithm: its case here, its registry entry, its own file.
#pragma once

#include <vector>

#include "algorithms/algorithms.h"

namespace cohort {

// MessagePassingCall: the buffers of one call, as each collective takes them.
struct MessagePassingCall {
  explicit MessagePassingCall(Collective c = Collective::kAllReduce) : collective(c) {}

  Collective collective;
  Buffer buffer;                                 // all_reduce, broadcast, reduce
  Buffer input;                                  // all_gather, gather
  Buffer output;                                 // scatter, reduce_scatter
  const std::vector<Buffer>* outputs = nullptr;  // all_gather, gather (root), all_to_all
  const std::vector<Buffer>* inputs = nullptr;   // scatter (root), reduce_scatter, all_to_all
  int root = 0;
  ReduceOp::Kind op = ReduceOp::SUM;  // as algorithms take it (AVG and PREMUL_SUM as SUM)
  // all_to_all: every rank's blocks have one size by the caller's contract
  // (OpContext::even_blocks), so Bruck's runs without agreeing on it.
  bool even_blocks = false;
};

// runs_over_messages: false for the algorithms that need the host's shared
// memory (shm_direct, hierarchical), which the backend runs itself.
bool runs_over_messages(Algorithm algorithm);

// run_message_passing runs `algorithm` for `call` over c.transport;
// kInvalidArgument when it does not run that collective over messages.
Status run_message_passing(AlgoContext& c, Algorithm algorithm, const MessagePassingCall& call);

}  // namespace cohort
