#include "algorithms/cost_model.h"

#include <algorithm>
#include <cstdio>

#include "common/config_registry.h"

namespace cohort {
namespace {

// The defaults. The network's is a 10-Gbit/s-class link between hosts
// (an exchange step of 20 us, 1.5 GB/s): loopback here is faster at 2
// ranks (a 4-byte broadcast 5.8 us a call, 4 MiB at 3.3 GB/s: COHORT_SHM=off
// cohort-bench broadcast --spawn 2) and far slower per step at 16-32 ranks
// on 2 cores, and neither is what a cluster's table should follow. The
// shared-memory and memory rates are this machine's order of magnitude;
// they decide little, since one host runs shm_direct whatever they are.
constexpr double kTcpLatencyUs = 20.0;
constexpr double kTcpBytesPerS = 1.5e9;
constexpr double kShmMessageLatencyUs = 3.0;
constexpr double kShmMessageBytesPerS = 4e9;
constexpr double kShmDirectLatencyUs = 0.3;
constexpr double kShmDirectBytesPerS = 8e9;
constexpr double kReduceBytesPerS = 6e9;
constexpr double kCopyBytesPerS = 10e9;
// Posting and completing one message of many in flight: what P-1 sends
// posted at once still cost the rank that posts them.
constexpr double kMessageUs = 1.0;
// A crowded machine's (CostModel::on_crowded_machine), from 16 ranks over
// loopback TCP on 2 cores (8 a CPU), blocks of 4 B, ranks bound:
// pairwise all_to_all, 30 messages a rank posted at once, took 563 us
// (2.3 us of a rank's CPU a message), Bruck's, 4 steps, 300 us (75 us a
// step, 9.4 us a rank). bench/calibrate_crowding.sh measures both again
// on another machine, for COHORT_COST_CROWDED_MESSAGE_US and _STEP_US.
constexpr double kCrowdedMessageUs = 2.3;
constexpr double kCrowdedStepUs = 9.4;

}  // namespace

GroupShape GroupShape::of(int ranks, int hosts) {
  hosts = std::max(1, std::min(hosts, ranks));
  const int most = (ranks + hosts - 1) / hosts;
  const Topology t = hosts == 1 ? Topology::kOneHost : most == 1 ? Topology::kNetwork : Topology::kHosts;
  return GroupShape{ranks, hosts, most, t};
}

std::string GroupShape::describe() const {
  std::string s = std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks");
  switch (topology) {
    case Topology::kNetwork:
      s += ", none sharing memory";
      break;
    case Topology::kOneHost:
      s += " on one host";
      break;
    case Topology::kHosts:
      s += " on " + std::to_string(hosts) + " hosts (up to " + std::to_string(most_per_host) + " a host)";
      break;
  }
  if (ranks_per_cpu > 1) {
    char crowd[32];
    std::snprintf(crowd, sizeof crowd, "%g", ranks_per_cpu);
    s += std::string(", ") + crowd + " a CPU";
  }
  return s;
}

CostModel CostModel::on_crowded_machine(double ranks_per_cpu) const {
  if (!(ranks_per_cpu > 1)) return *this;
  const double r = ranks_per_cpu;
  CostModel m = *this;
  m.message_s = r * std::max(message_s, crowded_message_s);
  m.reduce_bytes_per_s = reduce_bytes_per_s / r;
  m.copy_bytes_per_s = copy_bytes_per_s / r;
  for (LinkCost* l : {&m.network, &m.shm_messages}) l->latency_s = std::max(l->latency_s, r * crowded_step_s);
  return m;
}

CostModel CostModel::from_config() {
  CostModel m{{kTcpLatencyUs * 1e-6, kTcpBytesPerS},
              {kShmMessageLatencyUs * 1e-6, kShmMessageBytesPerS},
              {kShmDirectLatencyUs * 1e-6, kShmDirectBytesPerS},
              kReduceBytesPerS,
              kCopyBytesPerS,
              kMessageUs * 1e-6,
              kCrowdedMessageUs * 1e-6,
              kCrowdedStepUs * 1e-6};
  const double us = config_float(knobs::kCostTcpUs);
  if (us > 0) m.network.latency_s = us * 1e-6;
  const double message_us = config_float(knobs::kCostCrowdedMessageUs);
  if (message_us > 0) m.crowded_message_s = message_us * 1e-6;
  const double step_us = config_float(knobs::kCostCrowdedStepUs);
  if (step_us > 0) m.crowded_step_s = step_us * 1e-6;
  const double gbits = config_float(knobs::kLinkGbits);
  if (gbits > 0) m.network.bytes_per_s = gbits * 1e9 / 8;
  return m;
}

}  // namespace cohort
