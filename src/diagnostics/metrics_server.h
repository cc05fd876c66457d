// metrics_server.h: the Prometheus text endpoint of a process's straggler
// accounting (COHORT_METRICS_PORT; docs/stragglers.md).
//
// One thread answers `GET /metrics` with the text `render` returns (the
// exposition format, version 0.0.4), one request a connection; it only
// reads what the groups already hold. It listens on COHORT_METRICS_ADDR
// (loopback by default), at COHORT_METRICS_PORT plus LOCAL_RANK, so the
// ranks of one host each have a port.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/json.h"

namespace cohort {

class MetricsServer {
 public:
  // start returns a server listening as the knobs say, or null when
  // COHORT_METRICS_PORT is 0; a port that cannot be bound is logged (the
  // job runs on without the endpoint).
  static std::unique_ptr<MetricsServer> start(std::function<std::string()> render);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  uint16_t port() const { return port_; }

 private:
  MetricsServer(int listen_fd, uint16_t port, std::function<std::string()> render);
  void run();
  void answer(int fd);

  const int listen_fd_;
  const uint16_t port_;
  const std::function<std::string()> render_;
  int stop_fd_ = -1;
  std::thread thread_;
};

// GroupMetrics is what the endpoint shows of one group: its name and
// ArrivalAccounting::report().
struct GroupMetrics {
  std::string group;
  Json report;
};

// metrics_text writes the groups' statistics in Prometheus' text format:
// cohort_collectives_total, cohort_collective_seconds_total,
// cohort_steps_per_second (this rank's); and from each group's summary
// cohort_straggler_last_total, cohort_straggler_waited_for_seconds_total,
// cohort_straggler_wait_seconds_total, cohort_straggler_lateness_seconds
// (quantiles 0.5, 0.9, 1), cohort_straggler_rank and cohort_busbw_gbytes_per_second.
std::string metrics_text(const std::vector<GroupMetrics>& groups);

}  // namespace cohort
