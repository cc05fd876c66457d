// logging.h: leveled log lines on stderr with a rank prefix.
//
//   COHORT_LOG(kWarning) << "peer " << peer << " closed the connection";
//
// prints "[cohort W 17:28:51.123 rank 3] peer ... closed the connection".
// The level comes from COHORT_LOG_LEVEL; a disabled line costs one compare
// and builds no string. The rank is set once a process knows it.
#pragma once

#include <sstream>
#include <string>

namespace cohort {

enum class LogLevel { kTrace = 0, kDebug, kInfo, kWarning, kError, kOff };

// log_enabled is true when lines of `level` are printed.
bool log_enabled(LogLevel level);

// set_log_rank puts "rank N" in every later line (-1 removes it).
void set_log_rank(int rank);

// LogLine collects one line and prints it, whole, when destroyed.
class LogLine {
 public:
  explicit LogLine(LogLevel level) : level_(level) {}
  ~LogLine();
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;
  template <class T>
  LogLine& operator<<(const T& v) {
    stream_ << v;
    return *this;
  }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

}  // namespace cohort

// The `if` keeps a disabled line from evaluating its arguments.
#define COHORT_LOG(level)                                  \
  if (!::cohort::log_enabled(::cohort::LogLevel::level)) { \
  } else                                                   \
    ::cohort::LogLine(::cohort::LogLevel::level)
