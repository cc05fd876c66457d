// hash_store.h: a Store inside one process.
//
// HashStore keeps its keys in memory; threads of one process share it. It is
// the store for ranks-as-threads tests and for single-process jobs.
#pragma once

#include <memory>

#include "cohort/store.h"

namespace cohort {

// HashStore is an in-process, thread-safe Store.
class HashStore : public Store {
 public:
  HashStore();
  ~HashStore() override;
  HashStore(const HashStore&) = delete;
  HashStore& operator=(const HashStore&) = delete;

  using Store::wait;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  void append(const std::string& key, const Bytes& value) override;
  std::vector<Bytes> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;
  std::chrono::milliseconds timeout() const override;
  void set_timeout(std::chrono::milliseconds timeout) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cohort
