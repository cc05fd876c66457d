#include "launcher/round_state.h"

#include <chrono>
#include <cstdlib>

#include "cohort/errors.h"

namespace cohort::launcher {

std::string RoundState::encode() const {
  std::string out = closed ? "closed|" : "open|";
  out += std::to_string(restarts) + "|" + std::to_string(last_call_ms) + "|";
  for (size_t i = 0; i < participants.size(); ++i) {
    if (i) out += ",";
    out += participants[i].first + "=" + std::to_string(participants[i].second);
  }
  return out;
}

RoundState RoundState::decode(const std::string& text) {
  RoundState s;
  size_t a = text.find('|'), b = text.find('|', a + 1), c = text.find('|', b + 1);
  if (a == std::string::npos || b == std::string::npos || c == std::string::npos)
    throw Error("malformed rendezvous round state '" + text + "'");
  s.closed = text.substr(0, a) == "closed";
  s.restarts = std::atoi(text.substr(a + 1, b - a - 1).c_str());
  s.last_call_ms = std::atoll(text.substr(b + 1, c - b - 1).c_str());
  std::string list = text.substr(c + 1);
  size_t start = 0;
  while (start < list.size()) {
    size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t eq = item.rfind('=');
    if (eq == std::string::npos)
      throw Error("malformed participant '" + item + "' in round state '" + text + "'");
    s.participants.emplace_back(item.substr(0, eq), std::atoi(item.c_str() + eq + 1));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return s;
}

int RoundState::index_of(const std::string& node) const {
  for (size_t i = 0; i < participants.size(); ++i)
    if (participants[i].first == node) return static_cast<int>(i);
  return -1;
}

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace cohort::launcher
