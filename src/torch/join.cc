// join.cc: the joining protocol of include/cohort/join.h.
#include "cohort/join.h"

#include <cstdint>
#include <exception>

#include "cohort/errors.h"

namespace cohort {
namespace {

thread_local Join* current_join = nullptr;
thread_local Joinable* current_first = nullptr;

// count_active all_reduces `mine` (1 while training, 0 once joined).
int32_t count_active(ProcessGroup& group, int32_t mine) {
  int32_t value = mine;
  group.all_reduce(Buffer::of(&value, 1));
  return value;
}

}  // namespace

Join::Join(std::vector<Joinable*> joinables, bool enable)
    : joinables_(std::move(joinables)), enabled_(enable) {
  if (!enabled_) return;
  if (joinables_.empty()) throw InvalidArgument("Join needs at least one joinable");
  for (Joinable* j : joinables_) {
    if (j == nullptr) throw InvalidArgument("Join was given a null joinable");
  }
  if (current_join != nullptr)
    throw InvalidArgument("Join contexts do not nest: one is already active on this thread");
  previous_ = current_join;
  current_join = this;
  current_first = joinables_.front();
}

Join::~Join() {
  if (enabled_ && !finished_ && std::uncaught_exceptions() == 0) {
    try {
      finish();
    } catch (...) {
      // A destructor must not throw; finish() explicitly to see the error.
    }
  }
  if (current_join == this) {
    current_join = previous_;
    current_first = nullptr;
  }
}

void Join::finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  auto group = joinables_.front()->join_process_group();
  bool is_last_joiner = true;
  while (count_active(*group, 0) > 0) {
    for (Joinable* j : joinables_) j->join_main_hook();
    is_last_joiner = false;
  }
  for (Joinable* j : joinables_) j->join_post_hook(is_last_joiner);
  current_join = previous_;
  current_first = nullptr;
}

bool Join::notify_join_context(Joinable& joinable) {
  if (current_join == nullptr || current_join->finished_) return false;
  // Only the first joinable counts the ranks still training, so that each
  // iteration is one agreement whatever the number of joinables.
  if (&joinable == current_first) count_active(*joinable.join_process_group(), 1);
  return true;
}

}  // namespace cohort
