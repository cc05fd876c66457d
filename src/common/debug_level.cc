#include "common/debug_level.h"

#include <atomic>
#include <cstdint>
#include <string>

#include "common/config_registry.h"

namespace cohort {
namespace {

// Cached like the log level: logging asks on every line it might print.
std::atomic<uint64_t> cached_debug_generation{~0ull};
std::atomic<int> cached_debug_level{static_cast<int>(DebugLevel::kOff)};

}  // namespace

DebugLevel debug_level() {
  const uint64_t gen = config_generation();
  if (cached_debug_generation.load(std::memory_order_acquire) != gen) {
    const std::string text = config_string(knobs::kDebug);  // the registry checks the choice
    const DebugLevel level = text == "detail" ? DebugLevel::kDetail
                             : text == "info" ? DebugLevel::kInfo
                                              : DebugLevel::kOff;
    cached_debug_level.store(static_cast<int>(level), std::memory_order_relaxed);
    cached_debug_generation.store(gen, std::memory_order_release);
  }
  return static_cast<DebugLevel>(cached_debug_level.load(std::memory_order_relaxed));
}

}  // namespace cohort
