// cpu_binding.h: each local rank of a host on a share of the cores of its
// own.
//
// Unbound, the ranks of a host go where the scheduler puts them, and it
// likes to move a woken thread to the CPU of the thread that woke it: two
// ranks that wake each other can share one CPU for the rest of a job, which
// then runs 3-4x slower at every size (docs/performance.md, "Steadiness").
// Bound each to cores of its own, none does. cohortrun and `cohort-bench
// --spawn` bind a worker between fork and exec; a rank started by any other
// launcher binds itself when it joins (COHORT_BIND, bind_from_environment).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace cohort {

// BindMode is how local ranks are bound: kCores gives each rank contiguous
// whole cores (and where there are several NUMA nodes, shares follow them),
// kNuma whole NUMA nodes (ranks share a node when they outnumber them),
// kAuto is kCores when every rank can have a core, and otherwise puts
// neighbouring ranks on one core (rank i of L on core i*C/L of C).
enum class BindMode { kAuto, kCores, kNuma, kNone };

// parse_bind_mode reads "auto", "cores", "numa" or "none"; the error names
// `where` (the flag or knob) and the value.
Result<BindMode> parse_bind_mode(const std::string& text, const std::string& where);
const char* bind_mode_name(BindMode mode);

// CpuTopology is a set of CPUs with each one's physical core and NUMA
// node, ordered by node, then core, then CPU number.
struct CpuTopology {
  struct Cpu {
    int id = 0;
    int core = 0;  // unique per physical core (its hyperthreads share it)
    int node = 0;
  };
  std::vector<Cpu> cpus;

  // of_this_process is the CPUs this thread may run on (its affinity mask,
  // which a cgroup's cpuset and taskset have already narrowed), with their
  // cores and nodes from sysfs (one node and a core per CPU where sysfs
  // does not say).
  static CpuTopology of_this_process();
  int core_count() const;
  int node_count() const;
  std::vector<int> ids() const;
};

// CpuShare is what one local rank gets: CPUs, or none and why.
struct CpuShare {
  std::vector<int> cpus;    // empty: leave the rank unbound
  std::string why_unbound;  // when empty: "--bind none", or why it did not bind
};

// share_of_cpus is local rank `local_rank` of `local_world_size`'s share of
// `topology` under `mode`. With at least as many cores (physical cores,
// all their hyperthreads) as ranks, shares are disjoint and contiguous:
// with C cores and L ranks, rank i gets cores [i*C/L, (i+1)*C/L). With
// fewer, kCores is an InvalidArgument that names both counts and the CPUs
// (`where` says whose affinity they came from), and kAuto puts rank i on
// core i*C/L, so neighbours share one core (shares overlap). kNuma works
// alike on NUMA nodes.
Result<CpuShare> share_of_cpus(BindMode mode, const CpuTopology& topology, int local_rank,
                               int local_world_size, const std::string& where);

// cpu_list_text writes CPU numbers as Linux does: "0-3,8".
std::string cpu_list_text(const std::vector<int>& cpus);
// parse_cpu_list reads that form ("0-3,8"); the error names the text.
Result<std::vector<int>> parse_cpu_list(const std::string& text);

// affinity_of_this_thread lists the CPUs this thread may run on.
std::vector<int> affinity_of_this_thread();
// bind_this_thread sets the calling thread's affinity (threads it starts
// later inherit it). Makes no allocation: safe between fork and exec.
// Returns false with errno set when the kernel refuses.
bool bind_this_thread(const std::vector<int>& cpus);
// bind_this_process sets the affinity of every thread of this process
// (/proc/self/task): torch's intra-op pool may already be running.
Status bind_this_process(const std::vector<int>& cpus);

// host_cpus is every CPU this host lets the job use: the cgroup's
// effective cpuset where there is one, else the online CPUs.
std::vector<int> host_cpus();

// BindOutcome is what bind_from_environment did.
struct BindOutcome {
  bool bound = false;
  std::vector<int> cpus;  // this rank's share, when bound
  std::string reason;     // why not, when not
};

// bind_from_environment binds this process as COHORT_BIND says, once per
// process (later calls return the first outcome): from LOCAL_RANK and
// LOCAL_WORLD_SIZE, as torchrun and cohortrun set them. Under "auto" (the
// default) it binds only a rank whose affinity is still all of
// host_cpus(), so a program or launcher that set its own is left alone;
// "cores" and "numa" divide the current affinity whatever it is; "none"
// binds nothing. cohortrun binds its workers itself and passes
// COHORT_BIND=none. Throws InvalidArgument when "cores" cannot fit.
BindOutcome bind_from_environment();

}  // namespace cohort
