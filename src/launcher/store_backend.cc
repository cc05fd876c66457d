#include "launcher/store_backend.h"

#include "cohort/errors.h"
#include "cohort/tcp_store.h"
#include "cohort/tcp_store_server.h"
#include "common/socket.h"

namespace cohort::launcher {

// torch's c10d rendezvous port when the endpoint names none.
constexpr int kDefaultStorePort = 29400;

StoreBackend::StoreBackend(std::unique_ptr<TcpStoreServer> server, std::unique_ptr<TcpStore> store,
                           std::string address)
    : server_(std::move(server)), store_(std::move(store)), address_(std::move(address)) {}

StoreBackend::~StoreBackend() = default;

std::optional<std::string> StoreBackend::get(const std::string& key) {
  // check first: TcpStore's get waits for a key that is absent.
  if (!store_->check({key})) return std::nullopt;
  return to_string(store_->get(key));
}

void StoreBackend::set(const std::string& key, const std::string& value) {
  store_->set(key, to_bytes(value));
}

bool StoreBackend::compare_set(const std::string& key, const std::optional<std::string>& expected,
                               const std::string& desired, std::optional<std::string>* current) {
  // An empty expected value means "absent" to the store; values are never
  // empty, so the two cannot be confused.
  std::string now = to_string(store_->compare_set(key, to_bytes(expected.value_or("")), to_bytes(desired)));
  if (current) *current = now.empty() ? std::nullopt : std::optional<std::string>(now);
  return now == desired;
}

std::string StoreBackend::describe() const {
  return "store at " + address_;
}

std::unique_ptr<RendezvousBackend> make_store_backend(const std::string& endpoint,
                                                      std::chrono::milliseconds timeout, bool* hosting) {
  std::string host;
  int port = 0;
  split_endpoint(endpoint, kDefaultStorePort, &host, &port);
  std::unique_ptr<TcpStoreServer> server;
  try {
    TcpStoreServerOptions options;
    options.host = host;
    options.port = static_cast<uint16_t>(port);
    server = std::make_unique<TcpStoreServer>(options);
    port = server->port();
    *hosting = true;
  } catch (const NetworkError&) {
    // Another host's address, or another launcher of this job on this host
    // hosts it already: connect.
    if (port == 0) throw;
  }
  TcpStoreOptions client;
  client.port = static_cast<uint16_t>(port);
  client.is_server = false;
  client.wait_for_workers = false;
  client.timeout = timeout;
  auto store = std::make_unique<TcpStore>(host, client);
  return std::make_unique<StoreBackend>(std::move(server), std::move(store), format_address(host, port));
}

}  // namespace cohort::launcher
