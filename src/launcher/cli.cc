#include "launcher/cli.h"

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>
#include <utility>
#include <vector>

#include "cohort/errors.h"
#include "common/logging.h"
#include "common/split.h"
#include "launcher/exit_codes.h"

namespace cohort::launcher {
namespace {

// Flag names as torchrun spells them, with its underscore twins.
std::string names(const std::string& dashed) {
  std::string under = dashed;
  for (size_t i = 2; i < under.size(); ++i)
    if (under[i] == '-') under[i] = '_';
  return under == dashed ? dashed : dashed + "," + under;
}

void finish(LaunchConfig& c, const std::string& nnodes, const std::string& nproc,
            const std::string& redirects, const std::string& tee, const std::string& rdzv_conf,
            const std::string& filter, double monitor_s) {
  parse_nnodes(nnodes, &c.min_nodes, &c.max_nodes);
  c.nproc_per_node = parse_nproc(nproc);
  c.redirects = parse_streams(redirects, "--redirects");
  c.tee = parse_streams(tee, "--tee");
  c.rdzv_conf = parse_rdzv_conf(rdzv_conf);
  if (!filter.empty()) c.local_ranks_filter = parse_ranks_filter(filter);
  if (monitor_s <= 0) throw InvalidArgument("--monitor-interval must be positive");
  if (c.master_port < 0 || c.master_port > 65535)
    throw InvalidArgument("--master-port " + std::to_string(c.master_port) + " is out of range (0-65535)");
  c.monitor_interval =
      std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(monitor_s * 1000)));
  if (c.rdzv_backend == "c10d") c.rdzv_backend = "store";
  if (c.standalone) {
    // torchrun's --standalone: one node, a store of its own on a free port.
    c.rdzv_backend = "store";
    c.rdzv_endpoint = "127.0.0.1:0";
    c.min_nodes = c.max_nodes = 1;
    if (c.rdzv_id == "none") c.rdzv_id = "";
  }
  if (c.rdzv_backend != "static" && c.rdzv_backend != "store" && c.rdzv_backend != "etcd") {
    throw InvalidArgument("--rdzv-backend is '" + c.rdzv_backend +
                          "', expected static, store (c10d) or etcd");
  }
  if (c.rdzv_backend == "static") {
    if (c.min_nodes != c.max_nodes) {
      throw InvalidArgument("--nnodes " + nnodes + ": a range needs --rdzv-backend store or etcd");
    }
    if (c.node_rank >= c.max_nodes) {
      throw InvalidArgument("--node-rank " + std::to_string(c.node_rank) + " is out of range for --nnodes " +
                            nnodes);
    }
  } else if (c.rdzv_endpoint.empty()) {
    throw InvalidArgument("--rdzv-backend " + c.rdzv_backend + " needs --rdzv-endpoint HOST[:PORT]");
  }
  if (c.program.empty()) throw InvalidArgument("no program to run: cohortrun [flags] PROGRAM [ARGS...]");
}

}  // namespace

// The Python that runs a script: COHORT_PYTHON, else the one whose torch
// this build found, else python3 on PATH.
std::string python_executable() {
  if (const char* env = std::getenv("COHORT_PYTHON"); env && *env) return env;
#ifdef COHORT_PYTHON_EXECUTABLE
  if (std::string(COHORT_PYTHON_EXECUTABLE).size() > 0) return COHORT_PYTHON_EXECUTABLE;
#endif
  return "python3";
}

// run_in_python puts the Python in front of the program when torchrun
// would run it in Python and the user did not say --no-python: with -m,
// with --run-path, or for a program whose name ends in .py. Any other
// program runs as given (a compiled worker needs no --no-python here,
// unlike under torchrun).
void run_in_python(LaunchConfig& c, bool module, bool run_path, bool no_python) {
  if (no_python) {
    if (module || run_path)
      throw InvalidArgument("--no-python cannot be combined with -m/--module or --run-path");
    return;
  }
  const std::string& first = c.program.front();
  const bool script = first.size() > 3 && first.compare(first.size() - 3, 3, ".py") == 0;
  if (!module && !run_path && !script) return;
  std::vector<std::string> command = {python_executable(), "-u"};
  if (module) command.push_back("-m");
  c.script_index = command.size();
  command.insert(command.end(), c.program.begin(), c.program.end());
  c.program = std::move(command);
#ifdef COHORT_PYTHON_PACKAGE_DIR
  c.python_path = COHORT_PYTHON_PACKAGE_DIR;
#endif
}

// signal_numbers reads --signals-to-handle: names from the set below,
// comma-separated, as torchrun writes them.
std::vector<int> signal_numbers(const std::string& text) {
  static const std::pair<const char*, int> kKnown[] = {{"SIGTERM", SIGTERM}, {"SIGINT", SIGINT},
                                                       {"SIGHUP", SIGHUP},   {"SIGQUIT", SIGQUIT},
                                                       {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}};
  std::vector<int> out;
  for (const std::string& name : split(text, ',')) {
    int number = 0;
    for (const auto& [known, value] : kKnown)
      if (name == known) number = value;
    if (number == 0) {
      throw InvalidArgument("--signals-to-handle: '" + name +
                            "' is not one of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2");
    }
    out.push_back(number);
  }
  return out;
}

// refuse_unsupported names a torchrun flag that was given although
// cohortrun cannot do what it asks, and why: accepting and ignoring it
// would run a different job than the one asked for.
void refuse_unsupported(const std::map<std::string, std::pair<std::string, const char*>>& given) {
  for (const auto& [flag, value_and_why] : given) {
    if (!value_and_why.first.empty())
      throw InvalidArgument(flag + " " + value_and_why.first + ": not supported by cohortrun (" +
                            value_and_why.second + ")");
  }
}

namespace {

// FlagValues holds what the flags say before it is checked and turned into
// the LaunchConfig (flags that need no more than a type check are bound to
// the config itself). The parser keeps the members' addresses: a
// FlagValues must stay put from the first add_*_flags call to the parse.
struct FlagValues {
  std::string nnodes = "1:1", nproc = "1", redirects = "0", tee = "0", rdzv_conf, filter;
  double monitor_s = 0.1;
  bool no_python = false, module = false, run_path = false;
  std::string start_method = "spawn", event_log_handler = "null", signals;
  double shutdown_timeout = -1;
  bool use_env = false;
  std::string bind = "auto";
  // torchrun's flags that cohortrun cannot honour: flag -> (the value
  // given, empty when none; why it is refused).
  std::map<std::string, std::pair<std::string, const char*>> unsupported;
};

// add_job_flags declares torchrun's flags for the shape of the job: nodes
// and workers, rendezvous, restarts, output, and how the program runs.
void add_job_flags(CLI::App& app, LaunchConfig& c, FlagValues& v) {
  app.add_option(names("--nnodes"), v.nnodes, "Number of nodes, or MIN:MAX for an elastic job");
  app.add_option(names("--nproc-per-node"), v.nproc, "Workers per node: a number, or auto (one per CPU)");
  app.add_option(names("--node-rank"), c.node_rank, "This node's rank (static rendezvous)");
  app.add_option(names("--master-addr"), c.master_addr, "Address of node 0 (static rendezvous)");
  app.add_option(names("--master-port"), c.master_port, "Port of node 0's store (static rendezvous)");
  app.add_option(names("--rdzv-backend"), c.rdzv_backend, "static, store (alias c10d) or etcd");
  app.add_option(names("--rdzv-endpoint"), c.rdzv_endpoint, "HOST[:PORT] of the rendezvous store or etcd");
  app.add_option(names("--rdzv-id"), c.rdzv_id, "Job id: every node of a job passes the same");
  app.add_option(names("--rdzv-conf"), v.rdzv_conf,
                 "KEY=VALUE,...: join_timeout, last_call_timeout, close_timeout (seconds)");
  app.add_flag("--standalone", c.standalone, "One node with a store of its own on a free port");
  app.add_option(names("--max-restarts"), c.max_restarts, "Restarts of the whole job before it fails");
  app.add_option(names("--monitor-interval"), v.monitor_s, "Seconds between checks of the workers");
  app.add_option("--role", c.role, "Role name of the workers");
  app.add_option(names("--log-dir"), c.log_dir, "Keep each worker's stdout and stderr under this folder");
  app.add_option("-r," + names("--redirects"), v.redirects, "Streams to send to files only: 0-3 or LR:V,...");
  app.add_option("-t,--tee", v.tee, "Streams to send to files and the console: 0-3 or LR:V,...");
  app.add_option(names("--local-ranks-filter"), v.filter, "Local ranks whose output the console shows");
  app.add_option(names("--local-addr"), c.local_addr, "This node's address as other nodes reach it");
  app.add_flag(names("--no-python"), v.no_python, "Run the program as given, never in Python");
  app.add_flag("-m," + names("--module"), v.module, "Run the program as a Python module (python -m)");
  app.add_flag(names("--run-path"), v.run_path,
               "Run the program, a Python file, with Python whatever its name");
}

// add_worker_flags declares the flags for how workers start, stop and see
// their rank, including torchrun's that cohortrun takes with one value only.
void add_worker_flags(CLI::App& app, LaunchConfig& c, FlagValues& v) {
  app.add_option(names("--start-method"), v.start_method,
                 "spawn, fork or forkserver: torchrun's start method of function entry points; a program "
                 "always runs in a process of its own, as under torchrun")
      ->check(CLI::IsMember({"spawn", "fork", "forkserver"}));
  app.add_option(names("--event-log-handler"), v.event_log_handler,
                 "null only: cohortrun records no torchelastic events")
      ->check(CLI::IsMember({"null"}));
  app.add_option(names("--signals-to-handle"), v.signals,
                 "Signals that stop the job, each passed on to the workers first "
                 "(default SIGTERM,SIGINT,SIGHUP,SIGQUIT)");
  app.add_option(names("--shutdown-timeout"), v.shutdown_timeout,
                 "Seconds the workers get after the stop signal before SIGKILL "
                 "(default COHORT_LAUNCHER_STOP_TIMEOUT_S)");
  app.add_flag(names("--as-gloo"), c.as_gloo,
               "Python workers get cohort groups where they ask torch for gloo (sets COHORT_AS_GLOO=1; "
               "docs/python.md)");
  app.add_option("--bind", v.bind,
                 "Bind each local rank to CPUs of its own: cores (contiguous whole cores), numa (whole "
                 "NUMA nodes), none, or auto (the default: cores when every local rank can have one, "
                 "else neighbouring ranks share a core; none where cohortrun's affinity was already "
                 "narrowed); within cohortrun's own affinity (docs/launcher.md)");
  app.add_flag(names("--use-env"), v.use_env,
               "LOCAL_RANK in the environment only (cohortrun's way; under cohort-launch, as under "
               "torch.distributed.launch, the program otherwise gets --local-rank=N)");
}

// add_refused_flags declares torchrun's flags that cohortrun cannot honour,
// so that giving one is refused by name (refuse_unsupported) rather than
// reported as unknown.
void add_refused_flags(CLI::App& app, FlagValues& v) {
  v.unsupported = {
      {"--duplicate-stdout-filters",
       {"", "no filtered copy of the workers' output is kept; --tee and --log-dir keep all of it"}},
      {"--duplicate-stderr-filters",
       {"", "no filtered copy of the workers' output is kept; --tee and --log-dir keep all of it"}},
      {"--logs-specs",
       {"",
        "it names a Python plugin class of torchrun's; cohortrun's logs are --log-dir, --redirects and "
        "--tee"}},
      {"--numa-binding",
       {"", "workers are not bound to NUMA nodes; numactl in front of the program binds them"}},
      {"--virtual-local-rank",
       {"", "LOCAL_RANK stays the worker's own and CUDA_VISIBLE_DEVICES is not changed"}},
  };
  for (auto& [flag, value_and_why] : v.unsupported)
    app.add_option(names(flag), value_and_why.first, std::string("Refused: ") + value_and_why.second);
}

// take_program sets c.program to what follows the flags (after a "--",
// when one separates them).
void take_program(const CLI::App& app, LaunchConfig& c) {
  c.program = app.remaining();
  if (!c.program.empty() && c.program.front() == "--") {
    c.program.erase(c.program.begin());
  } else if (!c.program.empty() && c.program.front().size() > 1 && c.program.front()[0] == '-') {
    // No program's name starts with '-': a flag cohortrun does not know.
    throw InvalidArgument("unknown flag " + c.program.front() + " (cohortrun --help lists the flags)");
  }
}

// apply_flags checks the parsed flags and fills the rest of `c` from them;
// `invoked` is argv[0]. Throws InvalidArgument naming a bad flag.
void apply_flags(const CLI::App& app, const FlagValues& v, const std::string& invoked, LaunchConfig& c) {
  refuse_unsupported(v.unsupported);
  finish(c, v.nnodes, v.nproc, v.redirects, v.tee, v.rdzv_conf, v.filter, v.monitor_s);
  if (!v.signals.empty()) c.signals_to_handle = signal_numbers(v.signals);
  if (app.count("--shutdown-timeout") > 0) {
    if (!(v.shutdown_timeout >= 0 && v.shutdown_timeout <= 86400))
      throw InvalidArgument("--shutdown-timeout " + std::to_string(v.shutdown_timeout) +
                            ": give seconds from 0 to 86400");
    c.shutdown_timeout_s = v.shutdown_timeout;
  }
  // cohort-launch is torch.distributed.launch: the local rank is also an
  // argument of the program unless --use-env.
  const std::string base = invoked.substr(invoked.find_last_of('/') + 1);
  c.pass_local_rank = base == "cohort-launch" && !v.use_env;
  run_in_python(c, v.module, v.run_path, v.no_python);
  c.bind = parse_bind_mode(v.bind, "--bind").value_or_throw();
  plan_worker_binding(c);
  if (c.worker_cpus.empty() && c.nproc_per_node > 1) {
    COHORT_LOG(kInfo) << "cohortrun: the workers run unbound: " << c.unbound_why;
  }
}

}  // namespace

CliOutcome parse_command_line(int argc, char** argv) {
  CliOutcome out;
  LaunchConfig& c = out.config;
  CLI::App app{"cohortrun: start and supervise the workers of a cohort (or torch) job, as torchrun does",
               "cohortrun"};
  // Everything from the program name on belongs to the program.
  app.prefix_command();
  FlagValues values;
  add_job_flags(app, c, values);
  add_worker_flags(app, c, values);
  add_refused_flags(app, values);
  try {
    app.parse(argc, argv);
    take_program(app, c);
    apply_flags(app, values, argv[0], c);
  } catch (const CLI::CallForHelp& e) {
    out.exit_code = app.exit(e);
    return out;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    out.exit_code = kExitUsage;
    return out;
  } catch (const Error& e) {
    std::cerr << "cohortrun: " << e.what() << "\n";
    out.exit_code = kExitUsage;
    return out;
  }
  out.run = true;
  return out;
}

}  // namespace cohort::launcher
