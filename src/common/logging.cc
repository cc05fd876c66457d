#include "common/logging.h"

#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "common/config_registry.h"
#include "common/debug_level.h"

namespace cohort {
namespace {

// The parsed level is cached and reparsed when the registry changes, so
// that log_enabled stays two atomic loads on hot paths.
std::atomic<uint64_t> cached_generation{~0ull};
std::atomic<int> cached_level{static_cast<int>(LogLevel::kWarning)};
std::atomic<int> log_rank{-2};  // -2: not yet read from RANK

LogLevel parse_level(const std::string& s) {
  if (s == "trace") return LogLevel::kTrace;
  if (s == "debug") return LogLevel::kDebug;
  if (s == "info") return LogLevel::kInfo;
  if (s == "warning") return LogLevel::kWarning;
  if (s == "error") return LogLevel::kError;
  return LogLevel::kOff;
}

int current_rank() {
  int r = log_rank.load(std::memory_order_relaxed);
  if (r != -2) return r;
  const char* env = std::getenv("RANK");
  r = env ? std::atoi(env) : -1;
  log_rank.store(r, std::memory_order_relaxed);
  return r;
}

}  // namespace

bool log_enabled(LogLevel level) {
  uint64_t gen = config_generation();
  if (cached_generation.load(std::memory_order_acquire) != gen) {
    LogLevel parsed;
    try {
      parsed = parse_level(config_string(knobs::kLogLevel));
      // COHORT_DEBUG=info|detail is a request for the info lines (group
      // creation, algorithm choices): it lowers the level, never raises it.
      if (debug_level() != DebugLevel::kOff && parsed > LogLevel::kInfo) parsed = LogLevel::kInfo;
    } catch (const std::exception& e) {
      // A bad COHORT_LOG_LEVEL must not stop the program; say so once.
      std::fprintf(stderr, "[cohort] %s; logging warnings\n", e.what());
      parsed = LogLevel::kWarning;
    }
    cached_level.store(static_cast<int>(parsed), std::memory_order_relaxed);
    cached_generation.store(gen, std::memory_order_release);
  }
  return level != LogLevel::kOff && static_cast<int>(level) >= cached_level.load(std::memory_order_relaxed);
}

void set_log_rank(int rank) {
  log_rank.store(rank, std::memory_order_relaxed);
}

LogLine::~LogLine() {
  static const char kLetters[] = "TDIWE";
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  struct tm tm;
  localtime_r(&tv.tv_sec, &tm);
  char head[96];
  int rank = current_rank();
  if (rank >= 0) {
    std::snprintf(head, sizeof head, "[cohort %c %02d:%02d:%02d.%03ld rank %d] ",
                  kLetters[static_cast<int>(level_)], tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<long>(tv.tv_usec / 1000), rank);
  } else {
    std::snprintf(head, sizeof head, "[cohort %c %02d:%02d:%02d.%03ld pid %d] ",
                  kLetters[static_cast<int>(level_)], tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<long>(tv.tv_usec / 1000), static_cast<int>(getpid()));
  }
  std::string line = head + stream_.str() + "\n";
  // One write(2) per line keeps lines of different threads and processes whole.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace cohort
