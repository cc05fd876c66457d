// shared_segment.h (shm): one shared-memory segment for the ranks of a
// host, set up through the store. The arena and every symmetric allocation
// are made this way.
//
// The leader (the host's first rank) creates the segment and publishes its
// name (or why it could not); the others open it by that name; the last to
// map it removes the name, so nothing is left in /dev/shm even if the job
// is killed a moment later; then every rank learns whether every one
// succeeded, so that all use the segment or none does.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cohort/store.h"
#include "common/deadline.h"
#include "common/shm_segment.h"
#include "common/status.h"

namespace cohort::shm {

struct SegmentPlan {
  std::string key;         // store keys' prefix, this segment's alone
  std::vector<int> ranks;  // the host's ranks; the first is the leader
  int me = 0;              // this rank (one of `ranks`)
  size_t bytes = 0;
  std::string what;  // for messages: "the shared-memory arena"
  // initialise (leader, before publishing the name) and check (every rank,
  // once mapped, before saying it succeeded) may be empty.
  std::function<Status(ShmSegment&)> initialise;
  std::function<Status(ShmSegment&)> check;
};

// share_segment maps plan's segment on every rank of `plan.ranks`, or
// fails on every one of them: kBackendError naming the rank that could
// not, kTimeout or kStoreError (with `plan.what`) when the store failed.
Result<ShmSegment> share_segment(Store& store, const SegmentPlan& plan, Deadline deadline);

}  // namespace cohort::shm
