// tcp_store.h: the Store that ranks on different hosts share over TCP.
//
// A TcpStore is a client of a TcpStoreServer. With `is_server` the
// constructor also starts the server inside this process (rank 0 does this
// in torch), on `port` (0 picks a free port; port() tells which). The server
// can also run alone as the `cohort-store` daemon. With a shared secret
// (options.token, or COHORT_STORE_TOKEN) client and server prove to each
// other that they know it (HMAC-SHA256 challenge) before any key is read or
// written; see docs/store_protocol.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cohort/store.h"

namespace cohort {

class TcpStoreServer;

// TcpStoreOptions are torch's TCPStoreOptions plus the authentication token.
struct TcpStoreOptions {
  // port of the server; with is_server, 0 picks a free one.
  uint16_t port = 29500;
  // is_server starts a TcpStoreServer in this process.
  bool is_server = false;
  // num_workers, when set with wait_for_workers, makes the server-side
  // constructor wait until that many TcpStores (itself included) connected.
  std::optional<int> num_workers;
  bool wait_for_workers = true;
  // timeout bounds connecting, waiting for workers and every blocking call.
  std::chrono::milliseconds timeout = kDefaultStoreTimeout;
  // token is the shared secret; unset means COHORT_STORE_TOKEN, and an empty
  // token means no authentication.
  std::optional<std::string> token;
  // server_owner names who hosts the server ("rank 0"), so that a client
  // that loses it says whom it lost; empty: not known.
  std::string server_owner;
};

// TcpStore is a Store client over TCP, optionally hosting the server.
class TcpStore : public Store {
 public:
  // Connects to host:port, retrying until options.timeout. Throws
  // TimeoutError naming the address when no server answers in time,
  // StoreError when authentication is refused, InvalidArgument for bad
  // options.
  explicit TcpStore(std::string host, const TcpStoreOptions& options = {});
  ~TcpStore() override;
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

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

  // host and port of the server this client talks to.
  const std::string& host() const;
  uint16_t port() const;

  // server returns the in-process server, or null when this is only a client.
  TcpStoreServer* server() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cohort
