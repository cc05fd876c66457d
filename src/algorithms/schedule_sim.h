// schedule_sim.h: a group's traced schedules (schedule_trace.h) played
// out in time under the cost model (cost_model.h).
//
// A discrete-event simulation, one call: every rank starts at 0 and posts
// its batches in order, each once the one before has completed.
//   - A send leaves after the rank's per-message cost (message_s for each
//     request before it in the batch). Between hosts its bytes queue for the
//     sending host's link and then the receiving host's, first come first
//     served (the host's ranks share both); within a host it takes the
//     message-passing rings' rate. It arrives half a latency after its
//     last byte left: the one-way half of the exchange step the model's
//     latency is.
//   - A receive completes when its message has arrived and the rank has
//     posted it; a rank that had to wait for it pays the other half
//     latency (waking up). Taking it in costs the rank message_s of CPU,
//     and its callback's reductions follow, in arrival order, so a
//     pipelined reduction overlaps the next segment's flight as the real
//     code does.
// One call is priced alone: the analytic model's tree steps at half a
// latency count on back-to-back calls overlapping, which one call cannot
// show.
//   - Bytes reduced between batches delay the next batch.
// Matching is by (source, destination, kind, tag), in sending order. A
// receive nobody sends, or a message nobody receives, is a desync the
// result names: the check that the traced schedules fit together.
#pragma once

#include <string>
#include <vector>

#include "algorithms/cost_model.h"
#include "algorithms/schedule_trace.h"

namespace cohort {

struct SimulatedCall {
  double seconds = 0;  // when the last rank finished
  int slowest_rank = 0;
  size_t messages = 0;
  double most_bytes_on_a_link = 0;  // into or out of one host
  Status status;                    // kDesync: the schedules do not fit together
};

// simulate plays out `schedules` (one per rank) of a group whose rank q is
// on host host_of[q] (named by its lowest rank).
SimulatedCall simulate(const std::vector<RankSchedule>& schedules, const std::vector<int>& host_of,
                       const CostModel& model);

// SimulationRequest: one collective at one size on one layout.
struct SimulationRequest {
  Collective collective = Collective::kAllReduce;
  size_t bytes = 0;  // a rank's, as the algorithm table counts them
  int ranks = 2;
  int hosts = 2;  // ranks spread evenly, consecutive ranks together
  // The algorithm to run; unset: the table's choice for the layout, or
  // the cheapest message-passing entry where the table's needs shared
  // memory (shm_direct, hierarchical), which the tracer cannot run.
  bool forced = false;
  Algorithm algorithm = Algorithm::kRing;
  size_t max_buffer_bytes = size_t{1} << 30;  // a rank's buffers, beyond which the call is refused
  size_t max_messages = size_t{1} << 25;      // the group's, beyond which tracing stops
};

struct SimulationReport {
  Algorithm algorithm = Algorithm::kRing;
  bool substituted = false;  // the table's own choice could not be traced
  Algorithm table_choice = Algorithm::kRing;
  SimulatedCall call;
  double model_seconds = 0;  // the cost model's analytic price of the same algorithm
  LowerBound bound{};
};

// layout_host_of: host_of for `ranks` ranks on `hosts` hosts.
std::vector<int> layout_host_of(int ranks, int hosts);

// run_simulation traces every rank of the request and simulates the call;
// an error when the layout or the buffers are refused or the algorithm
// cannot be traced.
Result<SimulationReport> run_simulation(const SimulationRequest& request, const CostModel& model);

}  // namespace cohort
