// split.h: a list written as text ("a,b,c") to its items.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cohort {

// split returns the items of `text` between `separator`s, empty ones
// included ("a,,b" has three; "" has one, empty).
inline std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> items;
  size_t begin = 0;
  for (;;) {
    const size_t end = text.find(separator, begin);
    items.emplace_back(
        text.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin));
    if (end == std::string_view::npos) return items;
    begin = end + 1;
  }
}

}  // namespace cohort
