// choice_log.h: COHORT_DEBUG=info's lines saying which algorithm a group's
// collectives run, once per collective and size class (a run of sizes the table chooses alike for),
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

 private:
  std::vector<std::pair<Collective, size_t>> logged_;  // (collective, size class limit)
};

}  // namespace cohort
