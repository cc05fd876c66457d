// store_backend.h: the rendezvous backend on a TcpStore (torch's c10d
// backend): one node hosts the server on the endpoint, the others connect.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "launcher/rendezvous_backend.h"

namespace cohort {
class TcpStore;
class TcpStoreServer;
}  // namespace cohort

namespace cohort::launcher {

class StoreBackend : public RendezvousBackend {
 public:
  StoreBackend(std::unique_ptr<TcpStoreServer> server, std::unique_ptr<TcpStore> store, std::string address);
  ~StoreBackend() override;

  std::optional<std::string> get(const std::string& key) override;
  void set(const std::string& key, const std::string& value) override;
  bool compare_set(const std::string& key, const std::optional<std::string>& expected,
                   const std::string& desired, std::optional<std::string>* current) override;
  std::string describe() const override;

 private:
  std::unique_ptr<TcpStoreServer> server_;  // when this node hosts it
  std::unique_ptr<TcpStore> store_;
  std::string address_;
};

// make_store_backend hosts the server when it can listen on the endpoint
// (port 0: a free port, as --standalone asks), else connects to it within
// `timeout`.
std::unique_ptr<RendezvousBackend> make_store_backend(const std::string& endpoint,
                                                      std::chrono::milliseconds timeout, bool* hosting);

}  // namespace cohort::launcher
