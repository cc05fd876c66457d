// tcp_store_server.h: the server side of TcpStore.
//
// One event-loop thread serves every client (thousands at once): it never
// blocks on a client, answers `get` and `wait` when the key is set instead of
// being polled, and bounds what any one client can make it hold in memory. A
// malformed frame, an unknown opcode, a wrong magic number or an oversized
// length closes that one connection with a logged reason; the others are
// served on. Run it inside a process (TcpStore with is_server) or alone as
// `cohort-store`.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace cohort {

// TcpStoreServerOptions configures a server.
struct TcpStoreServerOptions {
  // host to listen on: empty listens on every address (IPv6 and IPv4).
  std::string host;
  // port to listen on; 0 picks a free one (see TcpStoreServer::port()).
  uint16_t port = 29500;
  // token is the shared secret; unset means COHORT_STORE_TOKEN, empty means
  // clients need not authenticate.
  std::optional<std::string> token;
};

// TcpStoreServerStats is a snapshot of what the server holds, for tests and
// for cohort-store's status line.
struct TcpStoreServerStats {
  int64_t open_connections = 0;
  int64_t accepted_connections = 0;
  int64_t closed_for_protocol_errors = 0;
  int64_t refused_authentications = 0;
  int64_t keys = 0;
  int64_t buffered_bytes = 0;  // input and output buffers of every connection
  int64_t pending_waits = 0;   // get/wait/multi_get requests not yet answered
};

// TcpStoreServer listens and serves on its own thread until destroyed.
class TcpStoreServer {
 public:
  // Binds and starts serving. Throws NetworkError naming the address when
  // it cannot listen (for example, the port is taken).
  explicit TcpStoreServer(const TcpStoreServerOptions& options);
  // Stops the thread and closes every connection.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // port is the port the server listens on (useful after asking for 0).
  uint16_t port() const;

  // stats is a consistent snapshot taken on the server's thread.
  TcpStoreServerStats stats() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cohort
