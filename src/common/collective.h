// collective.h: what each collective is, named once for every layer.
//
// Two levels, one table. A Collective is a family as the algorithm table
// chooses for it: all_gather and all_gather_into_tensor run the same
// algorithms. A CollectiveCall is the call a program made, as the flight
// recorder, the desync fingerprint, the straggler statistics and error
// messages name it. Each call's row (collective.cc) says its name, its
// family and which of its counts every rank must agree on; nothing else
// lists collectives by name. Adding one: docs/extending.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cohort {

enum class Collective : uint8_t {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kGather,
  kScatter,
  kReduceScatter,
  kAllToAll,
  kBarrier
};
constexpr int kCollectives = static_cast<int>(Collective::kBarrier) + 1;

const char* collective_name(Collective c);
bool parse_collective(const std::string& name, Collective* out);

// The numbers travel in desync fingerprints between ranks of one build.
enum class CollectiveCall : uint8_t {
  kNone = 0,
  kBroadcast,
  kAllReduce,
  kAllReduceCoalesced,
  kReduce,
  kAllGather,
  kAllGatherIntoTensor,
  kGather,
  kScatter,
  kReduceScatter,
  kReduceScatterTensor,
  kAllToAll,
  kAllToAllSingle,
  kBarrier,
};

// SameCount: which element count a call records (flight recorder) must be
// the same on every rank under one sequence number. Some may differ: the
// inputs of all_gather (the outputs' total agrees), gather's and
// scatter's lists (empty off the root), all_to_all's splits.
enum class SameCount : uint8_t { kInput, kOutput, kNone };

struct CollectiveCallInfo {
  CollectiveCall call;
  const char* name;  // torch.distributed's name for the function
  Collective family;
  SameCount recorded_count;
  // The fingerprint's one count (the buffer of broadcast, all_reduce and
  // reduce, the input of the gathers, the output of scatter and the
  // reduce-scatters) is the same on every rank.
  bool fingerprint_count_agrees;
};

// call_info of a value outside the enum is kNone's row.
const CollectiveCallInfo& call_info(CollectiveCall call);
inline const char* call_name(CollectiveCall call) {
  return call_info(call).name;
}
bool parse_call(std::string_view name, CollectiveCall* out);

// leaves_together: the families every rank leaves at about the moment the
// last rank arrives (all_reduce, all_gather, reduce_scatter, all_to_all,
// barrier). In a rooted one (broadcast, reduce, gather, scatter) a rank
// off the root's path leaves early. straggler_index numbers them 0-4, the
// order of kLeaveTogether; -1 for the others.
constexpr int kLeaveTogether = 5;
int straggler_index(Collective family);
inline bool leaves_together(Collective family) {
  return straggler_index(family) >= 0;
}
Collective leave_together_family(int index);  // 0 <= index < kLeaveTogether

}  // namespace cohort
