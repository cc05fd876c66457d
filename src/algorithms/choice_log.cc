#include "algorithms/choice_log.h"

#include <algorithm>
#include <cstdint>

#include "common/logging.h"

namespace cohort {

void ChoiceLog::note(Collective collective, size_t bytes, Algorithm algorithm, Topology topology,
                     int world_size, const std::string& what) {
  const size_t limit = size_class_limit(collective, bytes, topology);
  const auto key = std::make_pair(collective, limit);
  if (std::find(logged_.begin(), logged_.end(), key) != logged_.end()) return;
  logged_.push_back(key);
  static const char* const kWhere[] = {"no shared memory", "one host, shared memory",
                                       "several hosts, shared memory within each"};
  COHORT_LOG(kInfo) << what << " runs " << algorithm_name(algorithm) << ": " << bytes << " bytes per rank, "
                    << world_size << " ranks, " << kWhere[static_cast<int>(topology)]
                    << " (logged once for its size class: "
                    << (limit == SIZE_MAX ? std::string("no upper bound")
                                          : "up to " + std::to_string(limit) + " bytes per rank")
                    << ")";
}

}  // namespace cohort
