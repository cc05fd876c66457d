// round_state.h: one rendezvous round as the backend stores it, in one
// value so that every change is a single compare_set:
//   "open|<restarts>|<last call deadline, unix ms>|<node>=<nproc>,<node>=<nproc>"
// A round is open while nodes join; closed, its participants (in join
// order, which is their group rank) are fixed.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cohort::launcher {

struct RoundState {
  bool closed = false;
  int restarts = 0;                                       // restarts of the job before this round
  int64_t last_call_ms = 0;                               // 0 until min nodes joined
  std::vector<std::pair<std::string, int>> participants;  // node id, workers

  std::string encode() const;
  // decode throws Error naming the text when it is malformed.
  static RoundState decode(const std::string& text);
  // index_of returns the group rank of `node`, or -1.
  int index_of(const std::string& node) const;
};

// unix_ms is the wall clock in milliseconds; deadlines in a round must mean
// the same on every node, which a steady clock would not.
int64_t unix_ms();

}  // namespace cohort::launcher
