#include "transport/shm/shared_segment.h"

#include "cohort/errors.h"

namespace cohort::shm {

Result<ShmSegment> share_segment(Store& store, const SegmentPlan& plan, Deadline deadline) {
  const int leader = plan.ranks.front();
  const std::string& key = plan.key;
  ShmSegment segment;
  Status made;
  try {
    if (plan.me == leader) {
      auto seg = ShmSegment::create(plan.bytes);
      if (seg.ok()) {
        segment = std::move(seg.value());
        if (plan.initialise) made = plan.initialise(segment);
      } else {
        made = seg.status();
      }
      store.set(key + "segment", to_bytes(made.ok() ? segment.name() : "!" + made.message()));
    } else {
      store.wait({key + "segment"}, deadline.as_timeout());
      const std::string name = to_string(store.get(key + "segment"));
      if (!name.empty() && name[0] == '!') {
        made = Status(StatusCode::kBackendError, "rank " + std::to_string(leader) + ": " + name.substr(1));
      } else {
        auto seg = ShmSegment::open(name, plan.bytes);
        if (seg.ok()) {
          segment = std::move(seg.value());
        } else {
          made = seg.status();
        }
      }
    }
    // The last rank to map it removes the name; where a rank failed, every
    // rank that mapped it removes it below.
    if (store.add(key + "mapped", 1) == static_cast<int64_t>(plan.ranks.size()) && segment.valid()) {
      segment.unlink();
    }
    if (made.ok() && segment.valid() && plan.check) made = plan.check(segment);
    store.set(key + "ok/" + std::to_string(plan.me), to_bytes(made.ok() ? "1" : made.message()));
    std::vector<std::string> keys;
    for (int q : plan.ranks) keys.push_back(key + "ok/" + std::to_string(q));
    store.wait(keys, deadline.as_timeout());
    auto answers = store.multi_get(keys);
    for (size_t i = 0; i < plan.ranks.size() && made.ok(); ++i) {
      const std::string s = to_string(answers[i]);
      if (s != "1") {
        made = Status(StatusCode::kBackendError,
                      "rank " + std::to_string(plan.ranks[i]) + " could not map " + plan.what + ": " + s);
      }
    }
  } catch (const TimeoutError& e) {
    made = timeout_error("setting up " + plan.what + ": " + e.what());
  } catch (const Error& e) {
    made = Status(StatusCode::kStoreError, "setting up " + plan.what + ": " + e.what());
  }
  if (!made.ok()) {
    segment.unlink();
    return made;
  }
  return segment;
}

}  // namespace cohort::shm
