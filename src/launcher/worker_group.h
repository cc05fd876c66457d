// worker_group.h: the workers of this node for one round of the job: their
// environment (torchrun's variables), their output, watching them, and
// stopping them all (SIGTERM, then SIGKILL after a grace period).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "launcher/launch_config.h"
#include "launcher/orphan_reaper.h"
#include "launcher/output_sink.h"
#include "launcher/worker_process.h"

namespace cohort::launcher {

// RoundAssignment is what a rendezvous round gave this node.
struct RoundAssignment {
  int round = 0;
  int group_rank = 0;        // this node's rank in the round
  int group_world_size = 1;  // nodes in the round
  int rank_offset = 0;       // global rank of this node's local rank 0
  int world_size = 1;
  std::string master_addr;
  int master_port = 0;
  int restart_count = 0;
};

// WorkerFailure is one failed worker, as the summary shows it.
struct WorkerFailure {
  int rank = -1;
  int local_rank = -1;
  pid_t pid = -1;
  ExitState state;
  std::string error_file;
  std::string error_file_shown;  // as the summary shows it: <N/A> when none was written
  std::string host;
  std::string message;  // from the error file, or a sentence about the signal
  std::string time;     // when it was seen, ISO 8601
};

enum class GroupState { kRunning, kSucceeded, kFailed };

class WorkerGroup {
 public:
  // Starts config.nproc_per_node workers of `path`. Their logs and error
  // files go under attempt_dir/<local_rank>/.
  // `reaper` is told of every worker's process group (orphan_reaper.h).
  WorkerGroup(const LaunchConfig& config, const std::string& path, const RoundAssignment& round,
              const std::string& run_id, const std::string& attempt_dir, OrphanReaper& reaper);
  ~WorkerGroup();

  // pump moves output and reaps workers for up to `timeout`, returning
  // early when a worker exits or `wake_fd` (if >= 0) becomes readable.
  void pump(std::chrono::milliseconds timeout, int wake_fd);

  // state: running until every worker exited 0 or any one failed.
  GroupState state();
  // failures lists the failed workers in the order they were seen.
  const std::vector<WorkerFailure>& failures() const { return failures_; }

  // stop sends `sig` to every worker's process group, waits up to `grace`
  // for them to exit (still moving their output), then kills the rest.
  // drain reads the workers' pipes until each reaches end of file (every
  // writer is gone) or `limit` passes (a grandchild may hold one open), so
  // that nothing a worker printed before exiting is lost.
  void drain(std::chrono::milliseconds limit);
  void stop(int sig, std::chrono::milliseconds grace);

  // worker_pids, for the tests' diagnostics and the summary.
  std::vector<pid_t> worker_pids() const;

 private:
  struct Worker;
  void reap();
  const LaunchConfig& config_;
  RoundAssignment round_;
  OrphanReaper& reaper_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<WorkerFailure> failures_;
  bool stopping_ = false;
};

// worker_environment is the environment of local rank `local_rank`: this
// process's, plus torchrun's variables (exported for tests), and
// COHORT_STRAGGLER_DIR=`straggler_dir` unless it is empty or already set.
std::vector<std::string> worker_environment(const LaunchConfig& config, const RoundAssignment& round,
                                            const std::string& run_id, int local_rank,
                                            const std::string& error_file,
                                            const std::string& straggler_dir = "");

// read_error_message returns the message of a torch elastic error file, or
// "" when it is missing or unreadable.
std::string read_error_message(const std::string& path);

// host_name is this host's name (gethostname).
std::string host_name();

}  // namespace cohort::launcher
