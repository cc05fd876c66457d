// rank_list.h: ranks as messages show them, "[0, 2, 3]".
#pragma once

#include <string>
#include <vector>

namespace cohort {

inline std::string rank_list(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

}  // namespace cohort
