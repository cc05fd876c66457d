// size_text.h: byte counts as people write them on command lines.
#pragma once

#include <cstddef>
#include <cstdlib>

namespace cohort {

// parse_size_text reads "64M", "4K", "1G" or a plain count of bytes.
inline size_t parse_size_text(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return static_cast<size_t>(v);
}

}  // namespace cohort
