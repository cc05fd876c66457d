#include "cohort/hash_store.h"

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "common/deadline.h"
#include "store/key_value_map.h"

namespace cohort {

struct HashStore::State {
  std::mutex mu;
  std::condition_variable changed;  // notified whenever a key is written
  KeyValueMap map;                  // guarded by mu
  std::atomic<int64_t> timeout_ms{kDefaultStoreTimeout.count()};

  // wait_for blocks (mu held through `lock`) until every key exists.
  void wait_for(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                std::chrono::milliseconds timeout, const char* op) {
    Deadline deadline = Deadline::after(timeout);
    for (;;) {
      auto missing = map.missing(keys);
      if (missing.empty()) return;
      if (deadline.is_never()) {
        changed.wait(lock);
      } else if (changed.wait_until(lock, deadline.when()) == std::cv_status::timeout) {
        missing = map.missing(keys);
        if (missing.empty()) return;
        throw_status(wait_timeout("HashStore", op, missing, timeout));
      }
    }
  }
};

HashStore::HashStore() : state_(std::make_unique<State>()) {}
HashStore::~HashStore() = default;

void HashStore::set(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->map.set(key, value);
  state_->changed.notify_all();
}

Bytes HashStore::get(const std::string& key) {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->wait_for(lock, {key}, timeout(), "get");
  return *state_->map.find(key);
}

int64_t HashStore::add(const std::string& key, int64_t amount) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto r = state_->map.add(key, amount);
  state_->changed.notify_all();
  return std::move(r).value_or_throw();
}

Bytes HashStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  std::lock_guard<std::mutex> lock(state_->mu);
  Bytes result = state_->map.compare_set(key, expected, desired);
  state_->changed.notify_all();
  return result;
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->map.missing(keys).empty();
}

void HashStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->wait_for(lock, keys, timeout, "wait");
}

bool HashStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->map.erase(key);
}

int64_t HashStore::num_keys() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->map.size();
}

void HashStore::append(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->map.append(key, value);
  state_->changed.notify_all();
}

std::vector<Bytes> HashStore::multi_get(const std::vector<std::string>& keys) {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->wait_for(lock, keys, timeout(), "multi_get");
  std::vector<Bytes> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(*state_->map.find(k));
  return out;
}

void HashStore::multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  throw_if_error(check_multi_set_sizes(keys.size(), values.size()));
  std::lock_guard<std::mutex> lock(state_->mu);
  for (size_t i = 0; i < keys.size(); ++i) state_->map.set(keys[i], values[i]);
  state_->changed.notify_all();
}

std::chrono::milliseconds HashStore::timeout() const {
  return std::chrono::milliseconds(state_->timeout_ms.load());
}

void HashStore::set_timeout(std::chrono::milliseconds timeout) {
  state_->timeout_ms.store(timeout.count());
}

}  // namespace cohort
