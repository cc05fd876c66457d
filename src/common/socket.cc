#include "common/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "common/config_registry.h"
#include "common/spin.h"

namespace cohort {
namespace {

std::string errno_text(int err) {
  return std::strerror(err);
}

std::string sockaddr_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    port = ntohs(in->sin_port);
  } else if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    port = ntohs(in6->sin6_port);
  }
  return format_address(buf, port);
}

struct AddrInfoList {
  addrinfo* head = nullptr;
  ~AddrInfoList() {
    if (head) freeaddrinfo(head);
  }
};

Status resolve(const std::string& host, uint16_t port, bool passive, AddrInfoList* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : AI_ADDRCONFIG;
  std::string service = std::to_string(port);
  // A numeric address needs no lookup (and AI_ADDRCONFIG would ask the
  // kernel for every interface, on every connect).
  in6_addr probe;
  if (host.find(':') != std::string::npos ? inet_pton(AF_INET6, host.c_str(), &probe) == 1
                                          : inet_pton(AF_INET, host.c_str(), &probe) == 1) {
    hints.ai_flags = AI_NUMERICHOST | (passive ? AI_PASSIVE : 0);
  }
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out->head);
  if (rc != 0) {
    return network_error("cannot resolve host '" + host + "': " + gai_strerror(rc));
  }
  return Status::ok_status();
}

Status set_nodelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    return network_error("setsockopt(TCP_NODELAY): " + errno_text(errno));
  }
  return Status::ok_status();
}

Result<Socket> bind_and_listen(int family, const sockaddr* addr, socklen_t len, int backlog) {
  Socket s(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return network_error("socket(): " + errno_text(errno));
  int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (family == AF_INET6) {
    int zero = 0;  // dual-stack: also accept IPv4 on the same port
    setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  }
  if (::bind(s.fd(), addr, len) != 0) {
    return network_error("cannot bind " + sockaddr_text(addr) + ": " + errno_text(errno));
  }
  if (::listen(s.fd(), backlog) != 0) {
    return network_error("cannot listen on " + sockaddr_text(addr) + ": " + errno_text(errno));
  }
  return s;
}

// try_connect makes one attempt at one address; returns the errno on failure.
// The connect itself blocks, bounded by SO_SNDTIMEO (which connect(2)
// honours): on loopback and LANs it completes inside the call, which spares
// a poll(2) and a wake-up per connection.
int try_connect(const addrinfo* ai, Deadline deadline, Socket* out) {
  Socket s(::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return errno;
  if (!deadline.is_never()) {
    // At least a millisecond, so that the last attempt before the deadline
    // still reports what really happened (refused, unreachable, ...).
    auto left = std::max(std::chrono::microseconds(1000),
                         std::chrono::duration_cast<std::chrono::microseconds>(deadline.remaining()));
    timeval tv{static_cast<time_t>(left.count() / 1000000), static_cast<suseconds_t>(left.count() % 1000000)};
    setsockopt(s.fd(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  int rc;
  do {
    rc = ::connect(s.fd(), ai->ai_addr, ai->ai_addrlen);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return errno == EINPROGRESS ? ETIMEDOUT : errno;
  timeval zero{0, 0};
  setsockopt(s.fd(), SOL_SOCKET, SO_SNDTIMEO, &zero, sizeof zero);
  if (!set_nonblocking(s.fd(), true).ok()) return errno;
  *out = std::move(s);
  return 0;
}

}  // namespace

void Socket::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void drain_wake_ups(int fd) {
  uint8_t bytes[64];
  for (;;) {
    const ssize_t n = ::recv(fd, bytes, sizeof bytes, MSG_DONTWAIT);
    if (n >= 0 || errno != EINTR) {
      if (n > 0) continue;
      return;
    }
  }
}

std::string format_address(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return (host.empty() ? std::string("*") : host) + ":" + std::to_string(port);
}

bool split_address(const std::string& address, std::string* host, uint16_t* port) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) return false;
  char* end = nullptr;
  const long value = std::strtol(address.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || value < 1 || value > 65535) return false;
  *host = address.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
  *port = static_cast<uint16_t>(value);
  return true;
}

Result<Socket> listen_tcp(const std::string& host, uint16_t port, int backlog) {
  if (host.empty()) {
    sockaddr_in6 any6{};
    any6.sin6_family = AF_INET6;
    any6.sin6_addr = in6addr_any;
    any6.sin6_port = htons(port);
    auto s6 = bind_and_listen(AF_INET6, reinterpret_cast<sockaddr*>(&any6), sizeof any6, backlog);
    if (s6.ok()) return s6;
    sockaddr_in any4{};
    any4.sin_family = AF_INET;
    any4.sin_addr.s_addr = htonl(INADDR_ANY);
    any4.sin_port = htons(port);
    return bind_and_listen(AF_INET, reinterpret_cast<sockaddr*>(&any4), sizeof any4, backlog);
  }
  AddrInfoList list;
  Status st = resolve(host, port, true, &list);
  if (!st.ok()) return st;
  Status last = network_error("no address for '" + host + "'");
  for (addrinfo* ai = list.head; ai; ai = ai->ai_next) {
    auto s = bind_and_listen(ai->ai_family, ai->ai_addr, ai->ai_addrlen, backlog);
    if (s.ok()) return s;
    last = s.status();
  }
  return last;
}

uint16_t local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

uint16_t port_to_bind_later() {
  // Below the ephemeral range, above the well-known and most registered
  // services' ports (and never below 10000: a range that starts at 11000 or
  // lower leaves nothing apart, and the kernel's own choice is as good).
  int ephemeral_first = 32768;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int first = 0;
  if (range >> first) ephemeral_first = first;
  const int lowest = std::max(10000, ephemeral_first - 12768);
  // One generator per thread: mt19937 is not safe to share unlocked.
  thread_local std::mt19937 random(std::random_device{}() ^ static_cast<unsigned>(getpid()) ^
                                   static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id())));
  for (int attempt = 0; attempt < 200 && ephemeral_first > 11000; ++attempt) {
    const auto port = static_cast<uint16_t>(lowest + random() % static_cast<unsigned>(ephemeral_first - lowest));
    if (listen_tcp("", port).ok()) return port;
  }
  auto s = listen_tcp("", 0);
  return s.ok() ? local_port(s.value().fd()) : 0;
}

std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  // After a reset the kernel no longer knows; callers name the peer too.
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "the peer";
  return sockaddr_text(reinterpret_cast<sockaddr*>(&ss));
}

Result<Socket> connect_tcp(const std::string& host, uint16_t port, Deadline deadline) {
  const std::string where = format_address(host, port);
  const auto max_pause =
      std::chrono::milliseconds(std::max<int64_t>(1, config_int(knobs::kConnectRetryMaxMs)));
  auto pause = std::chrono::milliseconds(5);
  int last_err = 0;
  int attempts = 0;
  for (;;) {
    AddrInfoList list;
    Status st = resolve(host, port, false, &list);
    if (!st.ok()) return st;
    for (addrinfo* ai = list.head; ai; ai = ai->ai_next) {
      Socket s;
      ++attempts;
      int err = try_connect(ai, deadline, &s);
      if (err == 0) {
        Status nd = set_nodelay(s.fd());
        if (!nd.ok()) return nd;
        return s;
      }
      last_err = err;
    }
    if (deadline.expired() || deadline.remaining() < std::chrono::milliseconds(1)) break;
    // The peer may not be listening yet: wait and try again.
    std::this_thread::sleep_for(std::min(pause, deadline.remaining()));
    pause = std::min(pause * 2, max_pause);
    if (deadline.expired()) break;
  }
  return timeout_error("could not connect to " + where + " before the deadline (" + std::to_string(attempts) +
                       " attempts; last error: " + errno_text(last_err) + ")");
}

Status set_nonblocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0) return network_error("fcntl(F_GETFL): " + errno_text(errno));
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd, F_SETFL, flags) != 0) return network_error("fcntl(F_SETFL): " + errno_text(errno));
  return Status::ok_status();
}

Status send_all(int fd, const void* data, size_t n, Deadline deadline) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pfd{fd, POLLOUT, 0};
      int rc = ::poll(&pfd, 1, deadline.poll_timeout_ms());
      if (rc == 0)
        return timeout_error("send to " + peer_address(fd) + " did not finish before the deadline");
      continue;
    }
    return network_error("send to " + peer_address(fd) + " failed: " + errno_text(errno));
  }
  return Status::ok_status();
}

Result<size_t> recv_some(int fd, void* data, size_t n, Deadline deadline, std::chrono::microseconds spin) {
  SpinPermit permit;
  if (spin.count() > 0 && permit.granted()) {
    const auto until = Clock::now() + spin;
    do {
      ssize_t r = ::recv(fd, data, n, MSG_DONTWAIT);
      if (r > 0) return static_cast<size_t>(r);
      if (r == 0) return network_error("connection closed by " + peer_address(fd));
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return network_error("receive from " + peer_address(fd) + " failed: " + errno_text(errno));
      }
    } while (Clock::now() < until);
  }
  for (;;) {
    pollfd pfd{fd, POLLIN, 0};
    int rc = ::poll(&pfd, 1, deadline.poll_timeout_ms());
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) return timeout_error("no reply from " + peer_address(fd) + " before the deadline");
    ssize_t r = ::recv(fd, data, n, 0);
    if (r > 0) return static_cast<size_t>(r);
    if (r == 0) return network_error("connection closed by " + peer_address(fd));
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    return network_error("receive from " + peer_address(fd) + " failed: " + errno_text(errno));
  }
}

Status recv_all(int fd, void* data, size_t n, Deadline deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    auto got = recv_some(fd, p, n, deadline);
    if (!got.ok()) return got.status();
    p += got.value();
    n -= got.value();
  }
  return Status::ok_status();
}

void raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  // A privileged process may also raise the hard limit; try for 64 Ki.
  constexpr rlim_t kWanted = 65536;
  if (rl.rlim_max < kWanted) {
    rlimit more{kWanted, kWanted};
    if (setrlimit(RLIMIT_NOFILE, &more) == 0) return;
  }
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace cohort
