// dynamic_rendezvous.h: rounds of nodes meeting through a backend (torch's
// dynamic rendezvous). A node joins the open round; the round closes when
// max nodes joined, or min nodes joined and last_call_timeout passed; node
// ranks are the join order. Any change after that (a failed worker
// anywhere, a new node that wants in) opens the next round, and every node
// that sees the round number move restarts its workers in it.
//
// Keys, under rdzv/<run id>/: "round" (the current round number),
// "round/<n>" (its RoundState), "round/<n>/master" (node 0's address for
// the workers' MASTER_ADDR:MASTER_PORT), "round/<n>/done/<group rank>",
// and "failed" (the summary of a job that ran out of restarts).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "launcher/launch_config.h"
#include "launcher/rendezvous_backend.h"
#include "launcher/round_state.h"
#include "launcher/worker_group.h"

namespace cohort::launcher {

class DynamicRendezvous {
 public:
  // `backend` must outlive this. `node_id` is unique per node and launch.
  DynamicRendezvous(RendezvousBackend& backend, const LaunchConfig& config, std::string run_id,
                    std::string node_id);

  // join returns this node's place in the next closed round. Throws
  // TimeoutError when no round closes with this node within join_timeout,
  // Error when `interrupted` returns true (the launcher got a signal).
  RoundAssignment join(const std::function<bool()>& interrupted);

  // round_moved is true when the job left the round this node runs in
  // (another node failed, or a node wants to join).
  bool round_moved();

  // restart_after_failure opens the next round as a restart of the job.
  // Returns false, opening nothing, when the job has no restart left.
  bool restart_after_failure();

  // fail_job records that the job failed, with `summary` for every node.
  void fail_job(const std::string& summary);
  // job_failure returns that summary once some node recorded it.
  std::optional<std::string> job_failure();

  // finish marks this node done, and, when `wait_for_all`, waits (up to
  // close_timeout) until every node of the round is done or the round
  // moved. The node hosting the store waits, so it does not take the store
  // away from nodes still running.
  void finish(bool wait_for_all);

 private:
  std::string key(const std::string& suffix) const { return "rdzv/" + run_id_ + "/" + suffix; }
  int current_round();
  RoundState read_round(int round);
  void open_next(int after_round, bool failure);
  RoundAssignment assignment(int round, const RoundState& state);

  RendezvousBackend& backend_;
  const LaunchConfig& config_;
  std::string run_id_;
  std::string node_id_;
  int my_round_ = -1;
  int group_world_size_ = 0;
  std::chrono::milliseconds join_timeout_, last_call_timeout_, close_timeout_;
};

// route_address returns this host's address on the route to `host` (the
// address other nodes reach it at), or "127.0.0.1" when unknown.
std::string route_address(const std::string& host);

// free_port returns a TCP port no one listens on now, for rank 0's store:
// below the ephemeral range (port_to_bind_later, common/socket.h).
int free_port();

}  // namespace cohort::launcher
