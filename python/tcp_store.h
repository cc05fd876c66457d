// tcp_store.h: cohort's TcpStore as a torch Store, so that a Python program
// can hand it to init_process_group (for "cohort" and for "gloo" alike):
// one event-loop server for thousands of clients, HMAC authentication
// with COHORT_STORE_TOKEN, and set() that returns once the server stored
// the key. Errors reach torch as DistStoreError carrying cohort's message.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>
#include <string>
#include <vector>

#include "cohort/tcp_store.h"

namespace cohort_torch {

class TorchTcpStore : public c10d::Store {
 public:
  // Connects to host:port (and with options.is_server first serves there).
  TorchTcpStore(std::string host, const cohort::TcpStoreOptions& options);

  c10::intrusive_ptr<c10d::Store> clone() override;
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  void setTimeout(const std::chrono::milliseconds& timeout) override;
  void append(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<std::vector<uint8_t>> multiGet(const std::vector<std::string>& keys) override;
  void multiSet(const std::vector<std::string>& keys,
                const std::vector<std::vector<uint8_t>>& values) override;
  bool hasExtendedApi() const override { return true; }

  const std::string& host() const { return store_->host(); }
  uint16_t port() const { return store_->port(); }

 private:
  const std::string host_;
  const cohort::TcpStoreOptions options_;
  // Shared by clones made before the server's owner went away: the server
  // lives as long as the store that started it.
  std::shared_ptr<cohort::TcpStore> store_;
};

}  // namespace cohort_torch
