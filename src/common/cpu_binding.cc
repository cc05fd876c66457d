#include "common/cpu_binding.h"

#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>

#include "cohort/errors.h"
#include "common/config_registry.h"
#include "common/knobs.h"
#include "common/logging.h"

namespace cohort {

namespace {

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

int read_int(const std::string& path, int fallback) {
  const std::string text = read_line(path);
  if (text.empty()) return fallback;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  return end == text.c_str() ? fallback : static_cast<int>(v);
}

// node_of_cpus maps each CPU to its NUMA node from /sys/devices/system/node.
std::map<int, int> node_of_cpus() {
  std::map<int, int> node_of;
  DIR* dir = ::opendir("/sys/devices/system/node");
  if (dir == nullptr) return node_of;
  while (dirent* e = ::readdir(dir)) {
    int node = 0;
    if (std::sscanf(e->d_name, "node%d", &node) != 1) continue;
    auto cpus = parse_cpu_list(read_line(std::string("/sys/devices/system/node/") + e->d_name + "/cpulist"));
    if (!cpus.ok()) continue;
    for (int c : cpus.value()) node_of[c] = node;
  }
  ::closedir(dir);
  return node_of;
}

// Shares of `n` items among `parts`: part i gets [i*n/parts, (i+1)*n/parts).
std::pair<int, int> share_bounds(int n, int parts, int i) {
  return {static_cast<int>(int64_t{i} * n / parts), static_cast<int>(int64_t{i + 1} * n / parts)};
}

// cpus_of returns the CPUs of `topology` whose key (core or node) is one of
// keys[first, last), in the topology's order.
std::vector<int> cpus_of(const CpuTopology& topology, const std::vector<std::pair<int, int>>& keys, int first,
                         int last, bool by_node) {
  std::set<std::pair<int, int>> wanted(keys.begin() + first, keys.begin() + last);
  std::vector<int> out;
  for (const auto& c : topology.cpus) {
    const auto key = by_node ? std::make_pair(c.node, 0) : std::make_pair(c.node, c.core);
    if (wanted.count(key)) out.push_back(c.id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Distinct (node, core) or (node, 0) keys in the topology's order.
std::vector<std::pair<int, int>> keys_of(const CpuTopology& topology, bool by_node) {
  std::vector<std::pair<int, int>> keys;
  for (const auto& c : topology.cpus) {
    const auto key = by_node ? std::make_pair(c.node, 0) : std::make_pair(c.node, c.core);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  return keys;
}

std::string plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

Result<BindMode> parse_bind_mode(const std::string& text, const std::string& where) {
  if (text == "auto") return BindMode::kAuto;
  if (text == "cores") return BindMode::kCores;
  if (text == "numa") return BindMode::kNuma;
  if (text == "none") return BindMode::kNone;
  return Status(StatusCode::kInvalidArgument,
                where + ": '" + text + "' is not a binding (auto, cores, numa or none)");
}

const char* bind_mode_name(BindMode mode) {
  switch (mode) {
    case BindMode::kAuto:
      return "auto";
    case BindMode::kCores:
      return "cores";
    case BindMode::kNuma:
      return "numa";
    case BindMode::kNone:
      return "none";
  }
  return "?";
}

CpuTopology CpuTopology::of_this_process() {
  CpuTopology t;
  const std::map<int, int> node_of = node_of_cpus();
  for (int id : affinity_of_this_thread()) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(id) + "/topology/";
    Cpu c;
    c.id = id;
    // A core is named by its package and its core id within the package.
    const int package = read_int(dir + "physical_package_id", 0);
    const int core = read_int(dir + "core_id", id);
    c.core = package * 65536 + core;
    auto n = node_of.find(id);
    c.node = n == node_of.end() ? 0 : n->second;
    t.cpus.push_back(c);
  }
  std::sort(t.cpus.begin(), t.cpus.end(), [](const Cpu& a, const Cpu& b) {
    return std::tie(a.node, a.core, a.id) < std::tie(b.node, b.core, b.id);
  });
  return t;
}

int CpuTopology::core_count() const {
  return static_cast<int>(keys_of(*this, false).size());
}
int CpuTopology::node_count() const {
  return static_cast<int>(keys_of(*this, true).size());
}

std::vector<int> CpuTopology::ids() const {
  std::vector<int> out;
  for (const auto& c : cpus) out.push_back(c.id);
  std::sort(out.begin(), out.end());
  return out;
}

Result<CpuShare> share_of_cpus(BindMode mode, const CpuTopology& topology, int local_rank,
                               int local_world_size, const std::string& where) {
  if (local_world_size < 1 || local_rank < 0 || local_rank >= local_world_size) {
    return Status(StatusCode::kInvalidArgument, "cannot bind local rank " + std::to_string(local_rank) +
                                                    " of " + std::to_string(local_world_size) +
                                                    " local ranks: out of range");
  }
  CpuShare share;
  if (mode == BindMode::kNone) {
    share.why_unbound = "binding is off (none)";
    return share;
  }
  if (topology.cpus.empty()) {
    share.why_unbound = "no CPU is known";
    return share;
  }
  const bool by_node = mode == BindMode::kNuma;
  const auto keys = keys_of(topology, by_node);
  const int n = static_cast<int>(keys.size());
  if (!by_node && n < local_world_size) {
    const std::string why = plural(local_world_size, "local rank needs", "local ranks need") + " " +
                            plural(local_world_size, "core", "cores") + " to bind one or more each, but " +
                            where + " has only " + plural(n, "core", "cores") + " (CPUs " +
                            cpu_list_text(topology.ids()) + ")";
    if (mode == BindMode::kCores) {
      return Status(StatusCode::kInvalidArgument,
                    "cannot bind to cores: " + why + "; use fewer ranks per host, bind numa, or bind none");
    }
    // auto: neighbours share a core (rank i on core i*C/L). Left unbound,
    // the scheduler moves ranks about and jobs differ by up to 1.4x; so
    // placed, they do not (4 ranks on 2 cores: worst of 4-6 jobs over the
    // best 1.02-1.16 against 1.18-1.43, docs/performance.md).
    const int core = static_cast<int>(int64_t{local_rank} * n / local_world_size);
    share.cpus = cpus_of(topology, keys, core, core + 1, false);
    return share;
  }
  if (n >= local_world_size) {
    const auto [first, last] = share_bounds(n, local_world_size, local_rank);
    share.cpus = cpus_of(topology, keys, first, last, by_node);
  } else {
    // More ranks than NUMA nodes: rank i shares node i*n/L with its neighbours.
    const int node = static_cast<int>(int64_t{local_rank} * n / local_world_size);
    share.cpus = cpus_of(topology, keys, node, node + 1, true);
  }
  return share;
}

std::string cpu_list_text(const std::vector<int>& cpus_in) {
  std::vector<int> cpus = cpus_in;
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

Result<std::vector<int>> parse_cpu_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string part;
  auto bad = [&] {
    return Status(StatusCode::kInvalidArgument, "'" + text + "' is not a CPU list (e.g. 0-3,8)");
  };
  while (std::getline(in, part, ',')) {
    if (part.empty()) continue;
    int lo = 0, hi = 0;
    char tail = 0;
    if (std::sscanf(part.c_str(), "%d-%d%c", &lo, &hi, &tail) == 2) {
    } else if (std::sscanf(part.c_str(), "%d%c", &lo, &tail) == 1) {
      hi = lo;
    } else {
      return bad();
    }
    if (lo < 0 || hi < lo || hi >= CPU_SETSIZE) return bad();
    for (int c = lo; c <= hi; ++c) out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> affinity_of_this_thread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

namespace {

cpu_set_t cpu_set_of(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  }
  return set;
}

}  // namespace

bool bind_this_thread(const std::vector<int>& cpus) {
  const cpu_set_t set = cpu_set_of(cpus);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

Status bind_this_process(const std::vector<int>& cpus) {
  const cpu_set_t set = cpu_set_of(cpus);
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) {
    if (sched_setaffinity(0, sizeof set, &set) == 0) return Status::ok_status();
    return Status(StatusCode::kInvalidArgument,
                  std::string("cannot bind to CPUs ") + cpu_list_text(cpus) + ": " + std::strerror(errno));
  }
  Status result = Status::ok_status();
  while (dirent* e = ::readdir(dir)) {
    const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
    if (tid <= 0) continue;
    // A thread that exited since the listing is no loss (ESRCH).
    if (sched_setaffinity(tid, sizeof set, &set) != 0 && errno != ESRCH && result.ok()) {
      result =
          Status(StatusCode::kInvalidArgument, "cannot bind thread " + std::to_string(tid) + " to CPUs " +
                                                   cpu_list_text(cpus) + ": " + std::strerror(errno));
    }
  }
  ::closedir(dir);
  return result;
}

std::vector<int> host_cpus() {
  // cgroup v2 names the cpuset its processes may use; v1 keeps it apart.
  for (const char* path : {"/sys/fs/cgroup/cpuset.cpus.effective",
                           "/sys/fs/cgroup/cpuset/cpuset.effective_cpus", "/sys/devices/system/cpu/online"}) {
    auto cpus = parse_cpu_list(read_line(path));
    if (cpus.ok() && !cpus.value().empty()) return cpus.value();
  }
  return affinity_of_this_thread();
}

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' ? static_cast<int>(n) : fallback;
}

BindOutcome bind_once() {
  BindOutcome out;
  const BindMode mode = parse_bind_mode(config_string(knobs::kBind), knobs::kBind.name).value_or_throw();
  const int local_rank = env_int("LOCAL_RANK", -1), local_size = env_int("LOCAL_WORLD_SIZE", -1);
  if (mode == BindMode::kNone) {
    out.reason = "COHORT_BIND=none";
    return out;
  }
  if (local_rank < 0 || local_size < 1) {
    out.reason = "LOCAL_RANK and LOCAL_WORLD_SIZE are not both set";
    return out;
  }
  const std::vector<int> mine = affinity_of_this_thread();
  if (mode == BindMode::kAuto && mine != host_cpus()) {
    out.reason =
        "this process's affinity (CPUs " + cpu_list_text(mine) + ") was already set, so auto leaves it";
    return out;
  }
  CpuShare share =
      share_of_cpus(mode, CpuTopology::of_this_process(), local_rank, local_size, "this process's affinity")
          .value_or_throw();
  if (share.cpus.empty()) {
    out.reason = share.why_unbound;
    return out;
  }
  Status st = bind_this_process(share.cpus);
  if (!st.ok()) {
    out.reason = st.message();
    return out;
  }
  out.bound = true;
  out.cpus = share.cpus;
  return out;
}

}  // namespace

BindOutcome bind_from_environment() {
  // Binding is the process's, made once: a second group must not halve the
  // share the first one bound.
  static std::once_flag once;
  static BindOutcome outcome;
  static Status failure = Status::ok_status();
  std::call_once(once, [] {
    try {
      outcome = bind_once();
    } catch (const Error& e) {
      failure = Status(StatusCode::kInvalidArgument, e.what());
    }
    if (outcome.bound) {
      COHORT_LOG(kInfo) << "bound this rank to CPUs " << cpu_list_text(outcome.cpus) << " (COHORT_BIND)";
    } else if (failure.ok()) {
      COHORT_LOG(kDebug) << "this rank is not bound: " << outcome.reason;
    }
  });
  throw_if_error(failure);
  return outcome;
}

}  // namespace cohort
