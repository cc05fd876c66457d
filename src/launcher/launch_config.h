// launch_config.h: what cohortrun was asked to do, parsed and checked: the
// torchrun flags as values, and the parsers for their small languages
// ("1:4" node ranges, "0:1,1:2" stream specs, "k=v,..." rendezvous conf).
#pragma once

#include <chrono>
#include <csignal>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/cpu_binding.h"

namespace cohort::launcher {

// StdStreams is torch's Std: which of a worker's streams a flag applies to.
enum StdStreams : int { kNone = 0, kStdout = 1, kStderr = 2, kBoth = 3 };

// StreamSpec is --redirects or --tee: one value for every local rank, or a
// value per local rank ("0:1,1:2"; ranks not listed get kNone).
struct StreamSpec {
  int all = kNone;
  std::map<int, int> per_rank;
  bool per_rank_form = false;
  int for_rank(int local_rank) const;
};

struct LaunchConfig {
  int min_nodes = 1;
  int max_nodes = 1;
  int nproc_per_node = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string rdzv_backend = "static";  // static, store (c10d), etcd
  std::string rdzv_endpoint;            // host[:port]
  std::string rdzv_id = "none";
  std::map<std::string, std::string> rdzv_conf;
  bool standalone = false;
  int max_restarts = 0;
  std::chrono::milliseconds monitor_interval{100};
  std::string role = "default";
  std::string log_dir;
  StreamSpec redirects;
  StreamSpec tee;
  std::optional<std::set<int>> local_ranks_filter;
  std::string local_addr;
  std::vector<std::string> program;  // the program and its arguments
  // --shutdown-timeout: seconds between the stop signal and SIGKILL; unset:
  // COHORT_LAUNCHER_STOP_TIMEOUT_S (TORCH_ELASTIC_SHUTDOWN_TIMEOUT).
  std::optional<double> shutdown_timeout_s;
  // --signals-to-handle: the signals that stop the job, each passed on to
  // the workers first (torch's default set).
  std::vector<int> signals_to_handle = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  // torch.distributed.launch's mode (cohort-launch) without --use-env:
  // each worker's program gets --local-rank=N before its own arguments.
  bool pass_local_rank = false;
  // Where in `program` the user's program (script or executable) stands:
  // 0, or after the Python and its flags.
  size_t script_index = 0;
  // Where the program runs in Python: a folder put in front of the
  // workers' PYTHONPATH (the cohort_torch package of this build).
  std::string python_path;
  // --as-gloo: the workers' Python programs get cohort groups where they ask
  // torch for "gloo" (COHORT_AS_GLOO=1; python/cohort_torch/as_gloo.py).
  bool as_gloo = false;
  // --bind: how each local rank is bound to CPUs (common/cpu_binding.h).
  // worker_cpus[lr] is local rank lr's share, planned from cohortrun's own
  // affinity when the flags are read; empty when the workers run unbound,
  // and then unbound_why says why.
  BindMode bind = BindMode::kAuto;
  std::vector<std::vector<int>> worker_cpus;
  std::string unbound_why;
};

// plan_worker_binding fills config.worker_cpus from config.bind and
// config.nproc_per_node over this process's CPUs; throws InvalidArgument
// naming why when --bind cores cannot give each local rank a core.
void plan_worker_binding(LaunchConfig& config);

// parse_nnodes reads "N" or "MIN:MAX"; throws InvalidArgument.
void parse_nnodes(const std::string& text, int* min_nodes, int* max_nodes);

// parse_nproc reads a count or "auto" (the number of CPUs, as torchrun on
// a host without GPUs).
int parse_nproc(const std::string& text);

// parse_streams reads "3" or "0:1,1:2"; throws InvalidArgument.
StreamSpec parse_streams(const std::string& text, const std::string& flag);

// parse_rdzv_conf reads "k=v,k2=v2"; throws InvalidArgument.
std::map<std::string, std::string> parse_rdzv_conf(const std::string& text);

// parse_ranks_filter reads "0,2,3"; throws InvalidArgument.
std::set<int> parse_ranks_filter(const std::string& text);

// conf_seconds reads a duration in seconds from the rendezvous conf, or
// returns `fallback` when the key is absent; throws InvalidArgument.
std::chrono::milliseconds conf_seconds(const LaunchConfig& config, const std::string& key,
                                       std::chrono::milliseconds fallback);

// parse_int reads a whole decimal integer in [lo, hi]; throws
// InvalidArgument naming `what`.
int parse_int(const std::string& text, const std::string& what, int lo, int hi);

}  // namespace cohort::launcher
