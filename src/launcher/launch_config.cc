#include "launcher/launch_config.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "cohort/errors.h"

namespace cohort::launcher {

int StreamSpec::for_rank(int local_rank) const {
  if (!per_rank_form) return all;
  auto it = per_rank.find(local_rank);
  return it == per_rank.end() ? kNone : it->second;
}

int parse_int(const std::string& text, const std::string& what, int lo, int hi) {
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || v < lo || v > hi) {
    throw InvalidArgument(what + " is '" + text + "', expected an integer in [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "]");
  }
  return static_cast<int>(v);
}

void parse_nnodes(const std::string& text, int* min_nodes, int* max_nodes) {
  auto colon = text.find(':');
  if (colon == std::string::npos) {
    *min_nodes = *max_nodes = parse_int(text, "--nnodes", 1, 1 << 20);
    return;
  }
  *min_nodes = parse_int(text.substr(0, colon), "--nnodes minimum", 1, 1 << 20);
  *max_nodes = parse_int(text.substr(colon + 1), "--nnodes maximum", 1, 1 << 20);
  if (*min_nodes > *max_nodes) {
    throw InvalidArgument("--nnodes is '" + text + "': the minimum is larger than the maximum");
  }
}

int parse_nproc(const std::string& text) {
  if (text == "auto" || text == "cpu") return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  return parse_int(text, "--nproc-per-node", 1, 1 << 16);
}

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t at = text.find(sep, start);
    out.push_back(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

}  // namespace

StreamSpec parse_streams(const std::string& text, const std::string& flag) {
  StreamSpec spec;
  if (text.find(':') == std::string::npos) {
    spec.all = parse_int(text, flag, 0, 3);
    return spec;
  }
  spec.per_rank_form = true;
  for (const auto& item : split(text, ',')) {
    auto colon = item.find(':');
    if (colon == std::string::npos) {
      throw InvalidArgument(flag + " item '" + item + "' in '" + text + "' is not LOCAL_RANK:VALUE");
    }
    int rank = parse_int(item.substr(0, colon), flag + " local rank", 0, 1 << 16);
    spec.per_rank[rank] =
        parse_int(item.substr(colon + 1), flag + " value for local rank " + std::to_string(rank), 0, 3);
  }
  return spec;
}

std::map<std::string, std::string> parse_rdzv_conf(const std::string& text) {
  std::map<std::string, std::string> conf;
  if (text.empty()) return conf;
  for (const auto& item : split(text, ',')) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw InvalidArgument("--rdzv-conf item '" + item + "' in '" + text + "' is not KEY=VALUE");
    }
    conf[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return conf;
}

std::set<int> parse_ranks_filter(const std::string& text) {
  std::set<int> ranks;
  for (const auto& item : split(text, ',')) ranks.insert(parse_int(item, "--local-ranks-filter", 0, 1 << 16));
  return ranks;
}

std::chrono::milliseconds conf_seconds(const LaunchConfig& config, const std::string& key,
                                       std::chrono::milliseconds fallback) {
  auto it = config.rdzv_conf.find(key);
  if (it == config.rdzv_conf.end()) return fallback;
  char* end = nullptr;
  double s = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0' || s < 0) {
    throw InvalidArgument("--rdzv-conf " + key + " is '" + it->second + "', expected seconds");
  }
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

void plan_worker_binding(LaunchConfig& config) {
  const CpuTopology topology = CpuTopology::of_this_process();
  config.worker_cpus.clear();
  config.unbound_why.clear();
  std::vector<std::vector<int>> shares;
  for (int lr = 0; lr < config.nproc_per_node; ++lr) {
    Result<CpuShare> share =
        share_of_cpus(config.bind, topology, lr, config.nproc_per_node, "cohortrun's affinity");
    if (!share.ok())
      throw InvalidArgument("--bind " + std::string(bind_mode_name(config.bind)) + ": " +
                            share.status().message());
    if (share.value().cpus.empty()) {
      config.unbound_why = share.value().why_unbound;
      return;
    }
    shares.push_back(share.value().cpus);
  }
  config.worker_cpus = std::move(shares);
}

}  // namespace cohort::launcher
