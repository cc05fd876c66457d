// rank_lines.h: the lines a test worker prints about itself ("rank R ..."),
// without its closing "rank R ok: ..." line, for tests that compare what
// two programs (cohort's and torch's) print line by line.
#pragma once

#include <string>
#include <vector>

namespace cohort::testing {

inline std::vector<std::string> rank_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    if (line.compare(0, 5, "rank ") == 0 && line.find(" ok: ") == std::string::npos) lines.push_back(line);
    at = end + 1;
  }
  return lines;
}

}  // namespace cohort::testing
