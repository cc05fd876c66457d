#include "algorithms/cost_model.h"

#include <algorithm>

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
      return s + ", none sharing memory";
    case Topology::kOneHost:
      return s + " on one host";
    case Topology::kHosts:
      return s + " on " + std::to_string(hosts) + " hosts (up to " + std::to_string(most_per_host) +
             " a host)";
  }
  return s;
}

CostModel CostModel::from_config() {
  CostModel m{{kTcpLatencyUs * 1e-6, kTcpBytesPerS},
              {kShmMessageLatencyUs * 1e-6, kShmMessageBytesPerS},
              {kShmDirectLatencyUs * 1e-6, kShmDirectBytesPerS},
              kReduceBytesPerS,
              kCopyBytesPerS,
              kMessageUs * 1e-6};
  const double us = config_float(knobs::kCostTcpUs);
  if (us > 0) m.network.latency_s = us * 1e-6;
  const double gbits = config_float(knobs::kLinkGbits);
  if (gbits > 0) m.network.bytes_per_s = gbits * 1e9 / 8;
  return m;
}

}  // namespace cohort
