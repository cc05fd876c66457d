#include "launcher/rendezvous_backend.h"

#include <thread>

#include "cohort/errors.h"
#include "launcher/etcd_backend.h"
#include "launcher/store_backend.h"

namespace cohort::launcher {

std::optional<std::string> RendezvousBackend::wait_while(const std::string& key,
                                                         const std::optional<std::string>& old,
                                                         std::chrono::steady_clock::time_point deadline,
                                                         std::chrono::milliseconds interval) {
  for (;;) {
    auto v = get(key);
    if (v != old || std::chrono::steady_clock::now() >= deadline) return v;
    std::this_thread::sleep_for(interval);
  }
}

void split_endpoint(const std::string& endpoint, int default_port, std::string* host, int* port) {
  *port = default_port;
  if (!endpoint.empty() && endpoint[0] == '[') {
    auto close = endpoint.find(']');
    if (close == std::string::npos) throw InvalidArgument("endpoint '" + endpoint + "' has no closing ']'");
    *host = endpoint.substr(1, close - 1);
    if (close + 1 < endpoint.size()) {
      if (endpoint[close + 1] != ':')
        throw InvalidArgument("endpoint '" + endpoint + "': expected [v6]:port");
      *port = parse_int(endpoint.substr(close + 2), "port of endpoint '" + endpoint + "'", 0, 65535);
    }
    return;
  }
  auto colon = endpoint.rfind(':');
  if (colon == std::string::npos || endpoint.find(':') != colon) {
    *host = endpoint;  // a name, or a bare IPv6 address
    return;
  }
  *host = endpoint.substr(0, colon);
  *port = parse_int(endpoint.substr(colon + 1), "port of endpoint '" + endpoint + "'", 0, 65535);
}

std::unique_ptr<RendezvousBackend> make_backend(const LaunchConfig& config, bool* hosting) {
  *hosting = false;
  auto timeout = conf_seconds(config, "join_timeout", std::chrono::seconds(600));
  if (config.rdzv_backend == "etcd") return std::make_unique<EtcdBackend>(config.rdzv_endpoint, timeout);
  return make_store_backend(config.rdzv_endpoint, timeout, hosting);
}

}  // namespace cohort::launcher
