// size_text.h: byte counts as people write them on command lines, and as
// messages print them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

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

// bytes_text writes a byte count for people: "4 B", "1.5 KiB", "4 MiB".
inline std::string bytes_text(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  if (v == static_cast<double>(static_cast<uint64_t>(v))) {
    std::snprintf(buf, sizeof buf, "%llu %s", static_cast<unsigned long long>(v), units[unit]);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[unit]);
  }
  return buf;
}

}  // namespace cohort
