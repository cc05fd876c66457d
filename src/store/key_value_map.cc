#include "store/key_value_map.h"

#include <cerrno>
#include <cstdlib>

namespace cohort {
namespace {

constexpr size_t kMaxKeysShown = 8;
constexpr size_t kMaxKeyCharsShown = 80;

std::string printable(const Bytes& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 40; ++i) {
    unsigned char c = v[i];
    s += (c >= 32 && c < 127) ? static_cast<char>(c) : '?';
  }
  if (v.size() > 40) s += "...";
  return s;
}

}  // namespace

Result<int64_t> KeyValueMap::add(const std::string& key, int64_t amount) {
  int64_t current = 0;
  auto it = map_.find(key);
  if (it != map_.end()) {
    std::string text(it->second.begin(), it->second.end());
    errno = 0;
    char* end = nullptr;
    long long parsed = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || errno != 0 || *end != '\0' || text.size() != std::string(text.c_str()).size()) {
      return invalid_argument("add(\"" + key + "\"): the key holds '" + printable(it->second) +
                              "', which is not an integer");
    }
    current = parsed;
  }
  // Wrap like two's-complement hardware does, without signed-overflow UB.
  int64_t next = static_cast<int64_t>(static_cast<uint64_t>(current) + static_cast<uint64_t>(amount));
  std::string text = std::to_string(next);
  map_[key] = Bytes(text.begin(), text.end());
  return next;
}

Bytes KeyValueMap::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  auto it = map_.find(key);
  if ((it == map_.end() && expected.empty()) || (it != map_.end() && it->second == expected)) {
    map_[key] = desired;
    return desired;
  }
  if (it == map_.end()) return expected;
  return it->second;
}

void KeyValueMap::append(const std::string& key, const Bytes& value) {
  Bytes& v = map_[key];
  v.insert(v.end(), value.begin(), value.end());
}

std::vector<std::string> KeyValueMap::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (map_.find(k) == map_.end()) out.push_back(k);
  }
  return out;
}

std::string describe_keys(const std::vector<std::string>& keys) {
  std::string s = "[";
  for (size_t i = 0; i < keys.size() && i < kMaxKeysShown; ++i) {
    if (i) s += ", ";
    s += '"';
    s += keys[i].size() > kMaxKeyCharsShown ? keys[i].substr(0, kMaxKeyCharsShown) + "..." : keys[i];
    s += '"';
  }
  if (keys.size() > kMaxKeysShown) s += ", ... (" + std::to_string(keys.size()) + " keys)";
  return s + "]";
}

Status wait_timeout(const std::string& store, const std::string& op, const std::vector<std::string>& missing,
                    std::chrono::milliseconds timeout) {
  return timeout_error(store + " " + op + " timed out after " + std::to_string(timeout.count()) +
                       " ms; keys still missing: " + describe_keys(missing));
}

Status check_multi_set_sizes(size_t keys, size_t values) {
  if (keys == values) return Status::ok_status();
  return invalid_argument("multi_set: " + std::to_string(keys) + " keys but " + std::to_string(values) +
                          " values");
}

}  // namespace cohort
