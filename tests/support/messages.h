// messages.h: the message of whatever a call throws, for tests that check
// that an error names the right thing, and how often a log says a thing.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <string>

namespace cohort::testing {

inline std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

// times_in counts the places `what` starts in `text`.
inline size_t times_in(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace cohort::testing
