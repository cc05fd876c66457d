// store.h: the key-value store every rank of a job shares.
//
// A Store is how ranks find each other: they publish addresses, count
// arrivals and wait for each other's keys. The interface and its semantics
// are torch.distributed's (c10d::Store): values are bytes, `get` blocks until
// the key exists, `add` keeps a decimal counter, every blocking call ends at
// the store's timeout (300 s unless set) with a TimeoutError that names the
// keys still missing. Implementations: HashStore, FileStore, PrefixStore,
// TcpStore. All are safe to use from several threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

// Bytes is a store value: arbitrary bytes, NULs included.
using Bytes = std::vector<uint8_t>;

// kDefaultStoreTimeout is torch's default store timeout, 300 seconds.
inline constexpr std::chrono::milliseconds kDefaultStoreTimeout{300000};

// kNoTimeout, passed as a timeout, means "wait as long as it takes" (torch's
// kNoTimeout). Use it knowingly: the rest of cohort never waits forever.
inline constexpr std::chrono::milliseconds kNoTimeout{0};

// to_bytes copies a string into a store value.
inline Bytes to_bytes(std::string_view s) {
  return Bytes(s.begin(), s.end());
}

// to_string copies a store value into a string.
inline std::string to_string(const Bytes& b) {
  return std::string(b.begin(), b.end());
}

// Store is the interface of every key-value store.
class Store {
 public:
  virtual ~Store() = default;

  // set stores `value` under `key`, replacing any value, and wakes waiters.
  virtual void set(const std::string& key, const Bytes& value) = 0;

  // get returns the value of `key`, waiting until it exists. Throws
  // TimeoutError naming the key after timeout().
  virtual Bytes get(const std::string& key) = 0;

  // add adds `amount` to the integer stored (in decimal) under `key`, which
  // starts at 0, and returns the new value. Throws InvalidArgument when the
  // existing value is not an integer.
  virtual int64_t add(const std::string& key, int64_t amount) = 0;

  // compare_set sets `key` to `desired` when its current value equals
  // `expected`, or when the key is absent and `expected` is empty. Returns
  // the value the key holds afterwards; when the key is absent and
  // `expected` is not empty, returns `expected` (torch's semantics).
  virtual Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;

  // check returns true when every key exists, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;

  // wait blocks until every key exists. Throws TimeoutError naming the keys
  // still missing when `timeout` passes (kNoTimeout: never).
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;

  // wait with the store's timeout().
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }

  // delete_key removes `key`; returns whether it existed.
  virtual bool delete_key(const std::string& key) = 0;

  // num_keys returns how many keys the store holds (torch counts the keys a
  // store uses for itself, and so do we).
  virtual int64_t num_keys() = 0;

  // append appends `value` to the value of `key`, creating it if absent.
  virtual void append(const std::string& key, const Bytes& value) = 0;

  // multi_get waits until every key exists and returns their values in order.
  virtual std::vector<Bytes> multi_get(const std::vector<std::string>& keys) = 0;

  // multi_set sets keys[i] to values[i]; throws InvalidArgument when the
  // lists differ in length.
  virtual void multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) = 0;

  // timeout is the deadline of get, multi_get and wait without a timeout.
  virtual std::chrono::milliseconds timeout() const = 0;

  // set_timeout changes timeout().
  virtual void set_timeout(std::chrono::milliseconds timeout) = 0;

  // root returns the store under every prefix this one adds (a
  // PrefixStore's wrapped store, all the way down), where keys that belong
  // to the whole job live; null when this store adds no prefix.
  virtual std::shared_ptr<Store> root() { return nullptr; }
};

}  // namespace cohort
