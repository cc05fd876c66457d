// rendezvous_backend.h: the few key-value operations the rendezvous rounds
// need, so that the round logic (dynamic_rendezvous.h) is written once for
// every backend: a TcpStore (store_backend.h) or etcd (etcd_backend.h).
//
// Values are never empty strings; a key that does not exist reads as nullopt.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "launcher/launch_config.h"

namespace cohort::launcher {

class RendezvousBackend {
 public:
  virtual ~RendezvousBackend() = default;

  // get returns the value of `key`, or nullopt when it does not exist.
  // Throws cohort::Error when the backend cannot be reached.
  virtual std::optional<std::string> get(const std::string& key) = 0;

  // set stores `value` under `key`.
  virtual void set(const std::string& key, const std::string& value) = 0;

  // compare_set sets `key` to `desired` when it holds `expected` (nullopt:
  // when it does not exist). Returns true when the key holds `desired`
  // afterwards (set by this call or an equal one); `current`, when given,
  // receives what the key holds afterwards.
  virtual bool compare_set(const std::string& key, const std::optional<std::string>& expected,
                           const std::string& desired, std::optional<std::string>* current = nullptr) = 0;

  // describe names the backend and its address, for messages.
  virtual std::string describe() const = 0;

  // wait_while returns the value of `key` once it differs from `old`, or
  // nullopt-or-`old` at `deadline`; polls every `interval`.
  std::optional<std::string> wait_while(const std::string& key, const std::optional<std::string>& old,
                                        std::chrono::steady_clock::time_point deadline,
                                        std::chrono::milliseconds interval);
};

// split_endpoint reads "host", "host:port" or "[v6]:port"; `default_port`
// when none is given. Throws InvalidArgument.
void split_endpoint(const std::string& endpoint, int default_port, std::string* host, int* port);

// make_backend builds the backend `config` asks for (store or etcd). For
// the store backend this node hosts the TcpStore server when it can listen
// on the endpoint's address (the endpoint is this host) and otherwise
// connects to it. `hosting` receives whether it hosts.
std::unique_ptr<RendezvousBackend> make_backend(const LaunchConfig& config, bool* hosting);

}  // namespace cohort::launcher
