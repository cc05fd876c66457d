#include "transport/tcp/connect.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "cohort/errors.h"
#include "common/byte_codec.h"
#include "common/config_registry.h"
#include "common/logging.h"
#include "common/rank_list.h"
#include "rendezvous/seat_claim.h"
#include "transport/tcp/acceptor.h"
#include "transport/tcp/hello.h"
#include "transport/tcp/link.h"

namespace cohort::tcp {
namespace {

std::string addr_key(int rank) {
  return "tcp/addr/" + std::to_string(rank);
}

std::string sockaddr_host(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = "";
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

Result<std::string> interface_address(const std::string& ifname) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return network_error(std::string("getifaddrs: ") + std::strerror(errno));
  std::string v4, v6;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || ifname != i->ifa_name) continue;
    if (i->ifa_addr->sa_family == AF_INET && v4.empty()) v4 = sockaddr_host(i->ifa_addr);
    if (i->ifa_addr->sa_family == AF_INET6 && v6.empty()) v6 = sockaddr_host(i->ifa_addr);
  }
  freeifaddrs(list);
  if (!v4.empty()) return v4;
  if (!v6.empty()) return v6;
  return invalid_argument("COHORT_SOCKET_IFNAME is '" + ifname +
                          "', but no interface of that name has an address");
}

// route_source asks the kernel which source address it would use to reach
// `host` (a UDP connect sends nothing).
Result<std::string> route_source(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), "9", &hints, &res);
  if (rc != 0) return network_error("cannot resolve '" + host + "': " + gai_strerror(rc));
  std::string out;
  for (addrinfo* ai = res; ai && out.empty(); ai = ai->ai_next) {
    Socket s(::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!s.valid() || ::connect(s.fd(), ai->ai_addr, ai->ai_addrlen) != 0) continue;
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (getsockname(s.fd(), reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
      out = sockaddr_host(reinterpret_cast<sockaddr*>(&ss));
    }
  }
  freeaddrinfo(res);
  if (out.empty()) return network_error("no route to '" + host + "'");
  return out;
}

Result<int> accept_one(int listener, Deadline deadline) {
  for (;;) {
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return network_error(std::string("accept: ") + std::strerror(errno));
    pollfd p{listener, POLLIN, 0};
    int rc = ::poll(&p, 1, deadline.poll_timeout_ms());
    if (rc == 0) return timeout_error("timed out accepting connections");
  }
}

// read_hello reads a caller's hello; nullopt for a connection that is not
// a cohort peer's (it is dropped). A caller has a few seconds: it sends its
// hello as soon as it connects, and a stranger that sends nothing must not
// hold up the ranks behind it.
std::optional<Hello> read_hello(int fd, Deadline deadline) {
  const Deadline soon = Deadline::sooner(deadline, Deadline::after(std::chrono::milliseconds(10000)));
  std::vector<uint8_t> bytes;
  size_t needed = 4;  // the magic first
  for (;;) {
    const size_t have = bytes.size();
    bytes.resize(needed);
    if (!recv_all(fd, bytes.data() + have, needed - have, soon).ok()) return std::nullopt;
    needed = hello_bytes_needed(bytes.data(), bytes.size());
    if (needed == 0) return std::nullopt;  // not a hello
    if (needed == bytes.size()) break;
  }
  return decode_hello(bytes.data(), bytes.size());
}

// never_arrived is the timeout error naming the ranks that had not published
// an address when time ran out, and how long this rank waited for them.
// Before the addresses, ranks wait for rank 0 alone (its seat claim is the
// first step), hence `only_rank0`.
Status never_arrived(Store& store, const std::vector<std::string>& keys,
                     std::chrono::steady_clock::time_point waited_from, bool only_rank0) {
  const int size = static_cast<int>(keys.size());
  std::vector<int> missing;
  for (int q = 0; q < size; ++q) {
    if (only_rank0 ? q == 0 : !store.check({keys[q]})) missing.push_back(q);
  }
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - waited_from);
  return timeout_error("ranks " + rank_list(missing) + " never arrived (waited " +
                       std::to_string(waited.count()) + " ms for " + std::to_string(size) + " ranks)");
}

// wait_for_addresses waits for every rank's address, a second at a time: a
// rank whose seat claim failed (a duplicate, another world size) ends every
// wait at once instead of leaving the others to time out.
Result<std::vector<Bytes>> wait_for_addresses(Store& store, int rank, const std::vector<std::string>& keys,
                                              Deadline deadline,
                                              std::chrono::steady_clock::time_point waited_from) {
  for (;;) {
    try {
      store.wait(keys, deadline.slice(std::chrono::milliseconds(1000)));
      return store.multi_get(keys);
    } catch (const TimeoutError&) {
      if (auto problem = seat_problem(store)) {
        acknowledge_seat_problem(store);
        return invalid_argument("rank " + std::to_string(rank) + " cannot join: " + *problem);
      }
      if (!deadline.is_never() && deadline.expired()) return never_arrived(store, keys, waited_from, false);
    }
  }
}

// call_lower_ranks connects to every lower rank and sends it this rank's
// hello; the answers are read later (await_hello_verdicts) so that no rank
// waits on one that is still calling.
Status call_lower_ranks(int rank, const std::vector<bool>& wanted, const std::vector<std::string>& names,
                        const GroupCredentials& credentials, Deadline deadline,
                        std::vector<Socket>& sockets) {
  const int size = static_cast<int>(wanted.size());
  for (int q = 0; q < rank; ++q) {
    if (!wanted[q]) continue;
    std::string host;
    uint16_t port = 0;
    if (!split_address(names[q], &host, &port)) {
      return network_error("rank " + std::to_string(q) + " published a bad address '" + names[q] + "'");
    }
    auto s = connect_tcp(host, port, deadline);
    if (!s.ok())
      return s.status().with_context("rank " + std::to_string(rank) + " connecting to rank " +
                                     std::to_string(q));
    const std::vector<uint8_t> hello = encode_hello(make_hello(credentials, rank, q, size));
    Status st = send_all(s.value().fd(), hello.data(), hello.size(), deadline);
    if (!st.ok())
      return st.with_context("rank " + std::to_string(rank) + " saying hello to rank " + std::to_string(q));
    sockets[q] = std::move(s.value());
  }
  return Status::ok_status();
}

// accept_higher_ranks accepts one connection from every higher rank. A
// connection without a cohort hello, or with one this group refuses, is
// dropped (with the refusal sent back) and does not count.
Status accept_higher_ranks(int listener, int rank, const std::vector<bool>& wanted,
                           const GroupCredentials& credentials, Deadline deadline, std::vector<Socket>& sockets) {
  const int size = static_cast<int>(wanted.size());
  std::vector<bool> have(static_cast<size_t>(size), false);
  const int callers = static_cast<int>(std::count(wanted.begin() + rank + 1, wanted.end(), true));
  for (int accepted = 0; accepted < callers; ++accepted) {
    auto fd = accept_one(listener, deadline);
    if (!fd.ok()) {
      std::vector<int> missing;
      for (int q = rank + 1; q < size; ++q) {
        if (wanted[q] && !have[q]) missing.push_back(q);
      }
      return timeout_error("rank " + std::to_string(rank) + ": ranks " + rank_list(missing) +
                           " never connected");
    }
    Socket s(fd.value());
    const std::string from = peer_address(s.fd());
    std::optional<Hello> hello = read_hello(s.fd(), deadline);
    if (!hello) {
      COHORT_LOG(kWarning) << "rank " << rank << ": dropping a connection from " << from
                           << " that did not say a cohort hello";
      --accepted;
      continue;
    }
    const int peer = hello->rank;
    auto refusal = judge_hello(*hello, credentials, rank, size, peer >= 0 && peer < size && have[peer]);
    // Lower ranks are called, not callers; a peer on shared memory does
    // not call at all.
    if (!refusal && (peer < rank || !wanted[peer])) refusal = Refusal::kRankOutOfRange;
    if (refusal) {
      COHORT_LOG(kWarning) << refused_by_us(*refusal, *hello, rank, size) << " (from " << from << ")";
      const std::vector<uint8_t> no = encode_refusal(*refusal, credentials.identity);
      (void)send_all(s.fd(), no.data(), no.size(), Deadline::after(std::chrono::seconds(1)));
      --accepted;
      continue;
    }
    const uint8_t welcome = static_cast<uint8_t>(HelloVerdict::kWelcome);
    Status st = send_all(s.fd(), &welcome, 1, deadline);
    if (!st.ok())
      return st.with_context("rank " + std::to_string(rank) + " answering rank " + std::to_string(peer));
    int one = 1;
    setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    have[peer] = true;
    sockets[peer] = std::move(s);
  }
  return Status::ok_status();
}

// await_hello_verdicts reads every lower rank's answer to this rank's hello.
// It runs once the higher ranks are accepted, so no rank waits on one that
// is still calling.
Status await_hello_verdicts(int rank, const std::vector<bool>& wanted, const std::vector<std::string>& names,
                            Deadline deadline, const std::vector<Socket>& sockets) {
  for (int q = 0; q < rank; ++q) {
    if (!wanted[q]) continue;
    uint8_t verdict = 0;
    Status st = recv_all(sockets[q].fd(), &verdict, 1, deadline);
    if (st.code() == StatusCode::kNetworkError) {
      return network_error("rank " + std::to_string(q) + " at " + names[q] + " closed rank " +
                           std::to_string(rank) + "'s connection without answering its hello (" +
                           st.message() +
                           "): it exited, or had all its peers already (another process holding rank " +
                           std::to_string(rank) + "?)");
    }
    if (!st.ok())
      return st.with_context("rank " + std::to_string(rank) + " waiting for rank " + std::to_string(q) +
                             " to answer its hello");
    if (verdict == static_cast<uint8_t>(HelloVerdict::kWelcome)) continue;
    auto why = read_refusal(sockets[q].fd(), deadline);
    if (!why.ok())
      return why.status().with_context("rank " + std::to_string(q) + " refused rank " + std::to_string(rank));
    return invalid_argument(refused_by_them(why.value().first, rank, q, names[q], why.value().second));
  }
  return Status::ok_status();
}

// ready_for_links makes the connected sockets what links expect: the
// handshake is blocking, the links' I/O is not, and the buffer size knob
// applies to every pair.
Status ready_for_links(int rank, std::vector<Socket>& sockets) {
  const int buffer_bytes = static_cast<int>(config_int(knobs::kTcpBufferBytes));
  for (auto& s : sockets) {
    if (!s.valid()) continue;
    Status nonblocking = set_nonblocking(s.fd(), true);
    if (!nonblocking.ok())
      return nonblocking.with_context("rank " + std::to_string(rank) + " connecting over TCP");
    if (buffer_bytes > 0) {
      setsockopt(s.fd(), SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof buffer_bytes);
      setsockopt(s.fd(), SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes);
    }
  }
  return Status::ok_status();
}

}  // namespace

Result<std::string> local_address(const std::string& peer_host) {
  std::string ifname = config_string(knobs::kSocketIfname);
  if (!ifname.empty()) return interface_address(ifname);
  if (peer_host.empty()) return std::string("127.0.0.1");
  return route_source(peer_host);
}

Result<Mesh> join_mesh(Store& store, int rank, int size, const std::string& address, Deadline deadline) {
  auto listener = listen_tcp(address, 0);
  if (!listener.ok())
    return listener.status().with_context("rank " + std::to_string(rank) + " cannot listen");
  const std::string mine = format_address(address, local_port(listener.value().fd()));
  const auto waited_from = std::chrono::steady_clock::now();
  std::vector<std::string> keys;
  for (int q = 0; q < size; ++q) keys.push_back(addr_key(q));
  auto seat = claim_seat(store, rank, size, deadline);
  if (!seat.ok()) {
    if (seat.status().code() == StatusCode::kTimeout) return never_arrived(store, keys, waited_from, true);
    return seat.status();
  }
  GroupCredentials credentials{seat.value(), config_string(knobs::kStoreToken), describe_this_process()};
  // "<address>\n<place>": an address holds no newline.
  store.set(addr_key(rank), to_bytes(mine + "\n" + this_rank_place()));
  auto addresses = wait_for_addresses(store, rank, keys, deadline, waited_from);
  if (!addresses.ok()) return addresses.status();
  Mesh mesh;
  mesh.sockets.resize(static_cast<size_t>(size));
  mesh.addresses.resize(static_cast<size_t>(size));
  mesh.places.resize(static_cast<size_t>(size));
  for (int q = 0; q < size; ++q) {
    const std::string record = to_string(addresses.value()[q]);
    const size_t newline = record.find('\n');
    mesh.addresses[q] = record.substr(0, newline);
    if (newline != std::string::npos) mesh.places[q] = parse_rank_place(record.substr(newline + 1));
  }
  mesh.wanted.assign(static_cast<size_t>(size), true);
  mesh.wanted[static_cast<size_t>(rank)] = false;
  mesh.listener = std::move(listener.value());
  mesh.credentials = std::move(credentials);
  return mesh;
}

Status connect_wanted(Mesh& mesh, int rank, Deadline deadline, bool lazy) {
  if (lazy) {
    // Everyone has joined; connections come with the first messages.
    mesh.lazy = true;
    return Status::ok_status();
  }
  // The listen backlog holds the higher ranks' calls while this rank calls
  // the lower ones, so this order cannot deadlock (connect.h).
  Status st = call_lower_ranks(rank, mesh.wanted, mesh.addresses, mesh.credentials, deadline, mesh.sockets);
  if (st.ok()) st = accept_higher_ranks(mesh.listener.fd(), rank, mesh.wanted, mesh.credentials, deadline, mesh.sockets);
  if (st.ok()) st = await_hello_verdicts(rank, mesh.wanted, mesh.addresses, deadline, mesh.sockets);
  if (st.ok()) st = ready_for_links(rank, mesh.sockets);
  if (!st.ok()) return st;
  mesh.listener.reset();  // every wanted peer is connected
  COHORT_LOG(kDebug) << "rank " << rank << " connected to "
                     << std::count(mesh.wanted.begin(), mesh.wanted.end(), true) << " peers over TCP";
  return Status::ok_status();
}

Result<Mesh> connect_mesh(Store& store, int rank, int size, const std::string& address, Deadline deadline,
                          bool allow_lazy) {
  auto mesh = join_mesh(store, rank, size, address, deadline);
  if (!mesh.ok()) return mesh.status();
  const bool lazy = allow_lazy && config_string(knobs::kTcpConnect) == "lazy";
  Status st = connect_wanted(mesh.value(), rank, deadline, lazy);
  if (!st.ok()) return st;
  return mesh;
}

TcpLinks make_links(Mesh mesh, int rank) {
  const int size = static_cast<int>(mesh.addresses.size());
  TcpLinks out;
  out.links.resize(static_cast<size_t>(size));
  if (!mesh.lazy) {
    for (int q = 0; q < size; ++q) {
      if (q == rank || !mesh.sockets[q].valid()) continue;
      out.links[q] = std::make_unique<TcpLink>(std::move(mesh.sockets[q]), mesh.addresses[q]);
    }
    return out;
  }
  auto credentials = std::make_shared<const GroupCredentials>(std::move(mesh.credentials));
  std::vector<TcpLink*> lazy(static_cast<size_t>(size), nullptr);
  for (int q = 0; q < size; ++q) {
    if (!mesh.wanted[q]) continue;  // this rank, or a peer reached another way
    auto link = std::make_unique<TcpLink>(mesh.addresses[q], rank, q, size, credentials);
    lazy[q] = link.get();
    out.links[q] = std::move(link);
  }
  out.acceptor = std::make_unique<TcpAcceptor>(rank, std::move(mesh.listener), std::move(lazy), credentials);
  return out;
}

}  // namespace cohort::tcp
