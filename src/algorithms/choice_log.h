// choice_log.h: COHORT_DEBUG=info's lines saying which algorithm a group's
// collectives run, once per collective and size class (a run of sizes the table chooses alike for),
// and which way a shared-memory algorithm went (its own second-level
// choice, which the table does not make), once per collective and way,
// so that a log shows every choice without a line per call.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/selection.h"

namespace cohort {

class ChoiceLog {
 public:
  // note logs `algorithm` for `what` ("all_reduce #3 of group g") the
  // first time this collective runs in the size class of `bytes` (per
  // rank). One per backend; used by the thread driving it.
  void note(Collective collective, size_t bytes, Algorithm algorithm, const AlgorithmTable& table,
            const std::string& what);
  // note_way logs `way` ("through the posts") for `what` the first time
  // this collective goes that way; `way` is a literal.
  void note_way(Collective collective, const char* way, const std::string& what);

 private:
  std::vector<std::pair<Collective, size_t>> logged_;     // (collective, size class limit)
  std::vector<std::pair<Collective, const char*>> ways_;  // (collective, way) logged
};

}  // namespace cohort
