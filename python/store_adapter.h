// store_adapter.h: torch's c10d::Store seen as a cohort::Store, so that a
// cohort group meets through the store torch hands a backend (TCPStore,
// FileStore, HashStore, each maybe behind PrefixStores) with cohort's own
// rendezvous code. torch's errors become cohort's: a wait past its
// timeout is TimeoutError, anything else the store reports StoreError.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>
#include <string>
#include <vector>

#include "cohort/store.h"

namespace cohort_torch {

class StoreAdapter : public cohort::Store {
 public:
  explicit StoreAdapter(c10::intrusive_ptr<c10d::Store> store);

  void set(const std::string& key, const cohort::Bytes& value) override;
  cohort::Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  cohort::Bytes compare_set(const std::string& key, const cohort::Bytes& expected,
                            const cohort::Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  void append(const std::string& key, const cohort::Bytes& value) override;
  std::vector<cohort::Bytes> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys, const std::vector<cohort::Bytes>& values) override;
  std::chrono::milliseconds timeout() const override;
  void set_timeout(std::chrono::milliseconds timeout) override;
  // root is torch's store under its PrefixStores, seen as cohort's.
  std::shared_ptr<cohort::Store> root() override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

// master_host_of is the host of the TCPStore under `store` (through any
// PrefixStores), which a cohort group uses to pick the interface its ranks
// listen on; empty for stores without a host (FileStore, HashStore).
std::string master_host_of(const c10::intrusive_ptr<c10d::Store>& store);

}  // namespace cohort_torch
