// key_value_map.h: torch's store semantics on an in-memory map.
//
// HashStore, FileStore (its cache) and the TcpStore server all keep their
// keys in a KeyValueMap, so that `add`, `compare_set` and `append` mean the
// same thing in every store. Not thread-safe: the owner locks.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "cohort/store.h"
#include "common/status.h"

namespace cohort {

class KeyValueMap {
 public:
  void set(const std::string& key, Bytes value) { map_[key] = std::move(value); }

  // find returns the value of `key`, or null.
  const Bytes* find(const std::string& key) const {
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : &it->second;
  }

  // add adds to the decimal integer under `key` (absent is 0). Overflow
  // wraps, as int64 arithmetic does in torch. Fails with kInvalidArgument
  // when the current value is not an integer.
  Result<int64_t> add(const std::string& key, int64_t amount);

  // compare_set applies torch's compare-and-set; returns the resulting value
  // (see Store::compare_set).
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired);

  void append(const std::string& key, const Bytes& value);
  bool erase(const std::string& key) { return map_.erase(key) > 0; }
  int64_t size() const { return static_cast<int64_t>(map_.size()); }

  // missing returns the keys of `keys` that are absent, in order.
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;

  void clear() { map_.clear(); }

  // for_each calls f(key, value) for every key, in no particular order.
  template <class F>
  void for_each(F f) const {
    for (const auto& [k, v] : map_) f(k, v);
  }

 private:
  std::unordered_map<std::string, Bytes> map_;
};

// describe_keys prints keys for an error message: [a, b, ...], cut short
// when there are many or they are long.
std::string describe_keys(const std::vector<std::string>& keys);

// wait_timeout builds the TimeoutError status every store raises.
Status wait_timeout(const std::string& store, const std::string& op, const std::vector<std::string>& missing,
                    std::chrono::milliseconds timeout);

// check_multi_set_sizes fails when keys and values differ in length.
Status check_multi_set_sizes(size_t keys, size_t values);

}  // namespace cohort
