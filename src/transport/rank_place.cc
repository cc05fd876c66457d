#include "transport/rank_place.h"

#include <algorithm>
#include <map>
#include <set>

#include "common/cpu_binding.h"
#include "transport/shm/host_identity.h"

namespace cohort {

std::string this_rank_place() {
  const std::string cpus = cpu_list_text(affinity_of_this_thread());
  return shm::boot_id() + " " + (cpus.empty() ? "?" : cpus) + " " + shm::host_identity();
}

RankPlace parse_rank_place(const std::string& text) {
  RankPlace place;
  const size_t space = text.find(' ');
  if (space == std::string::npos) return place;
  place.machine = text.substr(0, space);
  if (place.machine == "?") place.machine.clear();
  const size_t second = text.find(' ', space + 1);
  const size_t cpus_end = second == std::string::npos ? text.size() : second;
  auto cpus = parse_cpu_list(text.substr(space + 1, cpus_end - space - 1));
  if (cpus.ok()) place.cpus = cpus.value();
  if (second != std::string::npos) place.host = text.substr(second + 1);
  return place;
}

std::vector<int> cpus_of_ranks(const std::vector<RankPlace>& places, const std::vector<int>& ranks) {
  std::set<int> usable;
  for (int q : ranks) {
    if (q < 0 || static_cast<size_t>(q) >= places.size() || places[static_cast<size_t>(q)].cpus.empty()) return {};
    const std::vector<int>& cpus = places[static_cast<size_t>(q)].cpus;
    usable.insert(cpus.begin(), cpus.end());
  }
  return {usable.begin(), usable.end()};
}

double ranks_per_cpu(const std::vector<RankPlace>& places) {
  struct Machine {
    int ranks = 0;
    std::set<int> cpus;
  };
  std::map<std::string, Machine> machines;
  for (const RankPlace& p : places) {
    if (p.machine.empty() || p.cpus.empty()) continue;
    Machine& m = machines[p.machine];
    ++m.ranks;
    m.cpus.insert(p.cpus.begin(), p.cpus.end());
  }
  double most = 1.0;
  for (const auto& [name, m] : machines) {
    most = std::max(most, static_cast<double>(m.ranks) / static_cast<double>(m.cpus.size()));
  }
  return most;
}

}  // namespace cohort
