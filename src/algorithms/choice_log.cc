#include "algorithms/choice_log.h"

#include <algorithm>
#include <cstdint>

#include "common/logging.h"

namespace cohort {

void ChoiceLog::note(Collective collective, size_t bytes, Algorithm algorithm, const AlgorithmTable& table,
                     const std::string& what) {
  const size_t limit = table.class_limit(collective, bytes);
  const auto key = std::make_pair(collective, limit);
  if (std::find(logged_.begin(), logged_.end(), key) != logged_.end()) return;
  logged_.push_back(key);
  COHORT_LOG(kInfo) << what << " runs " << algorithm_name(algorithm) << ": " << bytes << " bytes per rank, "
                    << table.shape().describe() << " (logged once for its size class: "
                    << (limit == SIZE_MAX ? std::string("no upper bound")
                                          : "up to " + std::to_string(limit) + " bytes per rank")
                    << ")";
}

void ChoiceLog::note_way(Collective collective, const char* way, const std::string& what) {
  const auto key = std::make_pair(collective, way);
  if (std::find(ways_.begin(), ways_.end(), key) != ways_.end()) return;
  ways_.push_back(key);
  COHORT_LOG(kInfo) << what << " goes " << way << " (logged once for this way)";
}

}  // namespace cohort
