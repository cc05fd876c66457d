// etcd_backend.h: the rendezvous backend on an etcd server, through its v3
// JSON gateway (/v3/kv/range, /v3/kv/put, /v3/kv/txn; keys and values in
// base64), with a plain HTTP/1.1 client. Keys live under /cohort/.
#pragma once

#include <chrono>
#include <string>

#include "launcher/rendezvous_backend.h"

namespace cohort::launcher {

class EtcdBackend : public RendezvousBackend {
 public:
  // endpoint: host[:port], port 2379 by default. Nothing is sent yet.
  EtcdBackend(const std::string& endpoint, std::chrono::milliseconds timeout);

  std::optional<std::string> get(const std::string& key) override;
  void set(const std::string& key, const std::string& value) override;
  bool compare_set(const std::string& key, const std::optional<std::string>& expected,
                   const std::string& desired, std::optional<std::string>* current) override;
  std::string describe() const override;

 private:
  std::string call(const std::string& path, const std::string& body);

  std::string host_;
  int port_ = 2379;
  std::chrono::milliseconds timeout_;
};

}  // namespace cohort::launcher
