#include "common/collective.h"

namespace cohort {
namespace {

using C = Collective;
using S = SameCount;

// One row a call, in the order of CollectiveCall. A family's first row is
// its plain call, whose name is the family's (the others add a suffix).
// kNone's row is what call_info answers for a value outside the enum: it
// has no family, and C::kBarrier only fills the field (parse_call never
// returns kNone, and no caller reads its family or counts).
constexpr CollectiveCallInfo kCalls[] = {
    {CollectiveCall::kNone, "no collective", C::kBarrier, S::kNone, false},
    {CollectiveCall::kBroadcast, "broadcast", C::kBroadcast, S::kInput, true},
    {CollectiveCall::kAllReduce, "all_reduce", C::kAllReduce, S::kInput, true},
    {CollectiveCall::kAllReduceCoalesced, "all_reduce_coalesced", C::kAllReduce, S::kInput, true},
    {CollectiveCall::kReduce, "reduce", C::kReduce, S::kInput, true},
    {CollectiveCall::kAllGather, "all_gather", C::kAllGather, S::kOutput, false},
    {CollectiveCall::kAllGatherIntoTensor, "all_gather_into_tensor", C::kAllGather, S::kOutput, true},
    {CollectiveCall::kGather, "gather", C::kGather, S::kNone, false},
    {CollectiveCall::kScatter, "scatter", C::kScatter, S::kNone, false},
    {CollectiveCall::kReduceScatter, "reduce_scatter", C::kReduceScatter, S::kInput, false},
    {CollectiveCall::kReduceScatterTensor, "reduce_scatter_tensor", C::kReduceScatter, S::kInput, true},
    {CollectiveCall::kAllToAll, "all_to_all", C::kAllToAll, S::kNone, false},
    {CollectiveCall::kAllToAllSingle, "all_to_all_single", C::kAllToAll, S::kNone, false},
    {CollectiveCall::kBarrier, "barrier", C::kBarrier, S::kNone, false},
};
constexpr int kCallCount = static_cast<int>(sizeof kCalls / sizeof kCalls[0]);

constexpr bool rows_in_enum_order() {
  for (int i = 0; i < kCallCount; ++i) {
    if (static_cast<int>(kCalls[i].call) != i) return false;
  }
  return kCallCount == static_cast<int>(CollectiveCall::kBarrier) + 1;
}
static_assert(rows_in_enum_order(), "kCalls must have one row per CollectiveCall, in its order");

constexpr bool starts_with(const char* text, const char* prefix) {
  for (; *prefix; ++text, ++prefix) {
    if (*text != *prefix) return false;
  }
  return true;
}

// family_row is the index of family c's first row, its plain call (0: none).
constexpr int family_row(int c) {
  for (int i = 1; i < kCallCount; ++i) {
    if (static_cast<int>(kCalls[i].family) == c) return i;
  }
  return 0;
}

constexpr bool every_family_is_named_by_its_plain_call() {
  for (int c = 0; c < kCollectives; ++c) {
    const int plain = family_row(c);
    if (plain == 0) return false;
    for (int i = plain + 1; i < kCallCount; ++i) {
      const bool in_family = static_cast<int>(kCalls[i].family) == c;
      if (in_family && !starts_with(kCalls[i].name, kCalls[plain].name)) return false;
    }
  }
  return true;
}
static_assert(every_family_is_named_by_its_plain_call(),
              "each family needs a row, and its first row must be the plain call the others extend");

constexpr Collective kLeaveTogetherFamilies[kLeaveTogether] = {C::kAllReduce, C::kAllGather, C::kReduceScatter,
                                                               C::kAllToAll, C::kBarrier};

}  // namespace

const char* collective_name(Collective c) {
  const int i = static_cast<int>(c);
  return i >= 0 && i < kCollectives ? kCalls[family_row(i)].name : "an unknown collective";
}

bool parse_collective(const std::string& name, Collective* out) {
  for (int k = 0; k < kCollectives; ++k) {
    if (name == kCalls[family_row(k)].name) return *out = static_cast<Collective>(k), true;
  }
  return false;
}

const CollectiveCallInfo& call_info(CollectiveCall call) {
  const int i = static_cast<int>(call);
  return i >= 0 && i < kCallCount ? kCalls[i] : kCalls[0];
}

bool parse_call(std::string_view name, CollectiveCall* out) {
  for (int i = 1; i < kCallCount; ++i) {
    if (name == kCalls[i].name) return *out = kCalls[i].call, true;
  }
  return false;
}

int straggler_index(Collective family) {
  for (int i = 0; i < kLeaveTogether; ++i) {
    if (kLeaveTogetherFamilies[i] == family) return i;
  }
  return -1;
}

Collective leave_together_family(int index) {
  return kLeaveTogetherFamilies[index];
}

}  // namespace cohort
