// messages.h: the message of whatever a call throws, for tests that check
// that an error names the right thing.
#pragma once

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

}  // namespace cohort::testing
