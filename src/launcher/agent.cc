#include "launcher/agent.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "cohort/errors.h"
#include "common/config_registry.h"
#include "common/logging.h"
#include "launcher/dynamic_rendezvous.h"
#include "launcher/exit_codes.h"
#include "launcher/failure_summary.h"
#include "launcher/launcher_signals.h"
#include "launcher/straggler_summary.h"
#include "launcher/worker_group.h"

namespace cohort::launcher {
namespace {

using std::chrono::milliseconds;

std::string random_hex(int digits) {
  std::random_device rd;
  std::string out;
  const char* hex = "0123456789abcdef";
  for (int i = 0; i < digits; ++i) out += hex[rd() % 16];
  return out;
}

// name_the_job gives the workers a job id (COHORT_JOB_ID, inherited), so
// that a rank of another job that reaches their store is refused naming
// both jobs: the --rdzv-id when given (every node passes the same); else,
// on one node, where this launcher is the whole job, a random one. Nodes
// of a multi-node job with no --rdzv-id share no id: none is set. A
// COHORT_JOB_ID the user set is kept.
void name_the_job_for(const LaunchConfig& config, const std::string& run_id) {
  const char* given = std::getenv("COHORT_JOB_ID");
  if (given && *given) return;
  std::string job;
  if (!config.rdzv_id.empty() && config.rdzv_id != "none") {
    job = config.rdzv_id;
  } else if (config.max_nodes == 1) {
    job = run_id == "none" || run_id.empty() ? random_hex(12) : run_id;
  }
  if (!job.empty()) setenv("COHORT_JOB_ID", job.c_str(), 1);
}

// Agent holds one launcher's state across rounds.
class Agent {
 public:
  explicit Agent(const LaunchConfig& config) : config_(config) {}
  ~Agent() {
    // Error files of a run without --log-dir lived in a temporary folder.
    std::error_code ignored;
    if (temp_logs_) std::filesystem::remove_all(log_root_, ignored);
  }
  int run();

 private:
  RoundAssignment static_round() const;
  int supervise(WorkerGroup& group);
  int finish_failed(const std::vector<WorkerFailure>& failures);

  const LaunchConfig& config_;
  std::string path_, run_id_, log_root_;
  bool temp_logs_ = false;
  milliseconds grace_{30000};
  std::unique_ptr<OrphanReaper> reaper_;
  std::unique_ptr<LauncherSignals> signals_;
  std::unique_ptr<RendezvousBackend> backend_;
  std::unique_ptr<DynamicRendezvous> rdzv_;
  bool hosting_ = false;
  int attempt_ = 0;
  int static_restarts_ = 0;
};

RoundAssignment Agent::static_round() const {
  RoundAssignment a;
  a.group_rank = config_.node_rank;
  a.group_world_size = config_.max_nodes;
  a.rank_offset = config_.node_rank * config_.nproc_per_node;
  a.world_size = config_.max_nodes * config_.nproc_per_node;
  a.master_addr = config_.master_addr;
  a.master_port = config_.master_port;
  a.restart_count = static_restarts_;
  return a;
}

int Agent::finish_failed(const std::vector<WorkerFailure>& failures) {
  std::string summary = failure_summary(config_.program.front(), failures);
  std::fputs(summary.c_str(), stderr);
  if (rdzv_) {
    try {
      rdzv_->fail_job(summary);
      rdzv_->finish(hosting_);
    } catch (const Error& e) {
      COHORT_LOG(kWarning) << "cohortrun: could not tell the other nodes the job failed: " << e.what();
    }
  }
  return kExitWorkersFailed;
}

// supervise watches `group` until it ends; returns an exit code, or -1 to
// start another round.
int Agent::supervise(WorkerGroup& group) {
  auto next_check = std::chrono::steady_clock::now();
  for (;;) {
    group.pump(config_.monitor_interval, signals_->fd());
    if (int sig = signals_->take()) {
      std::fprintf(stderr, "cohortrun: received %s; stopping the workers\n", signal_name(sig).c_str());
      group.stop(sig, grace_);
      return 128 + sig;
    }
    GroupState state = group.state();
    if (state == GroupState::kSucceeded) {
      group.drain(std::chrono::seconds(2));
      if (rdzv_) rdzv_->finish(hosting_);
      return kExitSuccess;
    }
    if (state == GroupState::kFailed) {
      group.stop(SIGTERM, grace_);
      for (const auto& f : group.failures()) {
        std::fprintf(stderr, "cohortrun: worker rank %d (local rank %d, pid %d) failed with %s\n", f.rank,
                     f.local_rank, f.pid, f.state.describe().c_str());
      }
      if (!rdzv_) {
        if (static_restarts_ >= config_.max_restarts) return finish_failed(group.failures());
        ++static_restarts_;
        return -1;
      }
      // A round that already moved was ended by another node; our failures
      // follow from it and cost no restart.
      if (rdzv_->round_moved() || rdzv_->restart_after_failure()) return -1;
      return finish_failed(group.failures());
    }
    if (rdzv_ && std::chrono::steady_clock::now() >= next_check) {
      next_check = std::chrono::steady_clock::now() + config_.monitor_interval;
      if (auto failed = rdzv_->job_failure()) {
        group.stop(SIGTERM, grace_);
        std::fprintf(stderr, "cohortrun: the job failed on another node:\n%s", failed->c_str());
        return kExitWorkersFailed;
      }
      if (rdzv_->round_moved()) {
        COHORT_LOG(kWarning)
            << "cohortrun: the job moved to a new round (a node failed or joined); restarting "
               "this node's workers";
        group.stop(SIGTERM, grace_);
        return -1;
      }
    }
  }
}

int Agent::run() {
  path_ = resolve_program(config_.program.front());
  if (path_.empty()) {
    std::fprintf(stderr, "cohortrun: cannot run '%s': %s\n", config_.program.front().c_str(),
                 why_not_runnable(config_.program.front()).c_str());
    return kExitSpawn;
  }
  const double grace_s = config_.shutdown_timeout_s.value_or(config_float(knobs::kLauncherStopTimeoutS));
  grace_ = milliseconds(static_cast<int64_t>(grace_s * 1000));
  // Forked before any thread starts, as the signal mask below is set.
  reaper_ = std::make_unique<OrphanReaper>();
  signals_ = std::make_unique<LauncherSignals>(config_.signals_to_handle);
  run_id_ = config_.rdzv_id.empty() ? random_hex(12) : config_.rdzv_id;
  name_the_job_for(config_, run_id_);
  if (config_.log_dir.empty()) {
    char tmpl[] = "/tmp/cohortrun_XXXXXX";
    if (!mkdtemp(tmpl)) throw Error("cannot create a temporary folder for error files");
    log_root_ = tmpl;
    temp_logs_ = true;
  } else {
    log_root_ = config_.log_dir;
  }
  const std::string run_dir = log_root_ + "/" + run_id_;
  if (config_.rdzv_backend != "static") {
    try {
      backend_ = make_backend(config_, &hosting_);
    } catch (const Error& e) {
      std::fprintf(stderr, "cohortrun: rendezvous backend %s at %s: %s\n", config_.rdzv_backend.c_str(),
                   config_.rdzv_endpoint.c_str(), e.what());
      return kExitRendezvous;
    }
    rdzv_ = std::make_unique<DynamicRendezvous>(
        *backend_, config_, run_id_, host_name() + "_" + std::to_string(getpid()) + "_" + random_hex(6));
  }
  for (;;) {
    RoundAssignment round;
    try {
      round = rdzv_ ? rdzv_->join([this] { return signals_->take() != 0; }) : static_round();
    } catch (const Error& e) {
      if (int sig = signals_->take()) return 128 + sig;
      std::fprintf(stderr, "cohortrun: %s\n", e.what());
      // A job that failed on another node while this one waited to join.
      bool failed_elsewhere = false;
      try {
        failed_elsewhere = rdzv_ && rdzv_->job_failure().has_value();
      } catch (const Error&) {
      }
      return failed_elsewhere ? kExitWorkersFailed : kExitRendezvous;
    }
    const std::string attempt_dir = run_dir + "/attempt_" + std::to_string(attempt_++);
    std::unique_ptr<WorkerGroup> group;
    try {
      group = std::make_unique<WorkerGroup>(config_, path_, round, run_id_, attempt_dir, *reaper_);
    } catch (const Error& e) {
      std::fprintf(stderr, "cohortrun: cannot start the workers: %s\n", e.what());
      return kExitSpawn;
    }
    int code;
    try {
      code = supervise(*group);
    } catch (const Error& e) {
      // The backend went away (its host died): nothing can coordinate a
      // restart any more.
      std::fprintf(stderr, "cohortrun: lost the rendezvous backend: %s\n", e.what());
      group->stop(SIGTERM, grace_);
      return kExitRendezvous;
    }
    // Whether the attempt ended the job or makes way for a restart: who the
    // workers waited for in it.
    const char* chosen = std::getenv("COHORT_STRAGGLER_DIR");
    if (auto line = straggler_summary(chosen && *chosen ? chosen : attempt_dir)) {
      std::fprintf(stderr, "%s%s\n", line->c_str(), code >= 0 ? "" : " (before this restart)");
    }
    if (code >= 0) return code;
  }
}

}  // namespace

int run_agent(const LaunchConfig& config) {
  Agent agent(config);
  return agent.run();
}

}  // namespace cohort::launcher
