// The TcpStore server: one epoll loop thread, every connection's state
// touched only there (docs/threading.md).
//
// A connection moves through hello -> (auth) -> ready. In ready it decodes
// frames and answers them in order. A get/wait/multi_get whose keys are
// missing parks the connection (`pending`) and registers it under each
// missing key in `waiters_`; setting a key wakes exactly those connections,
// so nobody polls. Memory per connection is bounded: input stops being read
// while a request is parked, while unsent replies exceed
// COHORT_STORE_MAX_OUTPUT_BYTES, and a frame may not exceed
// COHORT_STORE_MAX_FRAME_BYTES.
#include "cohort/tcp_store_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "cohort/errors.h"
#include "common/config_registry.h"
#include "common/event_loop.h"
#include "common/logging.h"
#include "common/socket.h"
#include "store/key_value_map.h"
#include "store/wire_protocol.h"

namespace cohort {
namespace {

constexpr size_t kReadChunk = 64 * 1024;

enum class Phase { kHello, kAuth, kReady };

struct Connection {
  Socket socket;
  // peer returns "addr:port" of the client, for log lines (looked up only
  // when a line is written: thousands of connects should not each pay it).
  std::string peer() const { return peer_address(socket.fd()); }
  Phase phase = Phase::kHello;
  Digest client_nonce{};
  Digest server_nonce{};
  std::vector<uint8_t> in;  // received, not yet decoded from in_pos on
  size_t in_pos = 0;
  std::vector<uint8_t> out;  // encoded, not yet sent from out_pos on
  size_t out_pos = 0;
  bool close_after_flush = false;
  uint32_t interest = 0;  // events currently registered with epoll
  std::optional<wire::Request> pending;
  // pending_missing counts the keys `pending` is registered under in
  // `waiters`: each set of one of them counts down, so that a wait for P
  // keys that P ranks set costs O(1) a set, not a look at all P keys (at
  // 128 ranks joining, every rank's wait for every address was 2 million
  // lookups and their copies).
  size_t pending_missing = 0;
  EventLoop::TimerId pending_timer = 0;
  EventLoop::TimerId handshake_timer = 0;

  size_t buffered_in() const { return in.size() - in_pos; }
  size_t buffered_out() const { return out.size() - out_pos; }
};

}  // namespace

struct TcpStoreServer::State {
  std::string token;
  wire::Limits limits{};
  size_t max_output = 0;
  std::chrono::milliseconds handshake_timeout{};
  Socket listener;
  uint16_t port = 0;
  EventLoop loop;
  std::thread thread;

  // Loop thread only, from here on.
  KeyValueMap map;
  std::unordered_map<int, std::unique_ptr<Connection>> connections;  // by fd
  std::unordered_map<std::string, std::unordered_set<int>> waiters;  // key -> parked fds
  std::vector<int> resume;  // parked connections that were answered and may go on
  TcpStoreServerStats counters;
  std::unique_ptr<uint8_t[]> scratch{new uint8_t[kReadChunk]};  // read_some's buffer
  Clock::time_point last_accept_warning{};

  // ---- connections -------------------------------------------------------

  void on_accept() {
    for (;;) {
      int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE) pause_accepting();
        return;
      }
      auto conn = std::make_unique<Connection>();
      conn->socket = Socket(fd);
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      conn->handshake_timer = loop.add_timer(Clock::now() + handshake_timeout, [this, fd] {
        if (Connection* c = find(fd)) {
          c->handshake_timer = 0;
          close_connection(c, "did not complete the hello within COHORT_STORE_HANDSHAKE_TIMEOUT_S", true);
        }
      });
      conn->interest = EPOLLIN | EPOLLRDHUP;
      loop.watch(fd, conn->interest, [this, fd](uint32_t events) { on_event(fd, events); });
      connections.emplace(fd, std::move(conn));
      ++counters.accepted_connections;
      // A client sends its hello right after connecting; it is often here
      // already, and reading now saves a trip through epoll.
      on_event(fd, EPOLLIN);
    }
  }

  // pause_accepting backs off for 100 ms when out of file descriptors, so
  // that the loop does not spin on a listener it cannot drain.
  void pause_accepting() {
    auto now = Clock::now();
    if (now - last_accept_warning > std::chrono::seconds(5)) {
      last_accept_warning = now;
      COHORT_LOG(kWarning) << "store server on port " << port << ": out of file descriptors with "
                           << connections.size() << " connections open; raise `ulimit -n`";
    }
    loop.unwatch(listener.fd());
    loop.add_timer(now + std::chrono::milliseconds(100),
                   [this] { loop.watch(listener.fd(), EPOLLIN, [this](uint32_t) { on_accept(); }); });
  }

  Connection* find(int fd) {
    auto it = connections.find(fd);
    return it == connections.end() ? nullptr : it->second.get();
  }

  void close_connection(Connection* c, const std::string& reason, bool protocol_error) {
    if (protocol_error) {
      ++counters.closed_for_protocol_errors;
      COHORT_LOG(kWarning) << "store server: closing connection from " << c->peer() << ": " << reason;
    } else {
      COHORT_LOG(kDebug) << "store server: connection from " << c->peer() << " closed: " << reason;
    }
    unpark(c);
    if (c->handshake_timer) loop.cancel_timer(c->handshake_timer);
    int fd = c->socket.fd();
    loop.unwatch(fd);
    connections.erase(fd);  // closes the socket
  }

  void on_event(int fd, uint32_t events) {
    Connection* c = find(fd);
    if (!c) return;
    if (events & EPOLLOUT) {
      if (!flush(c)) return;
    }
    if (events & EPOLLIN) {
      if (!read_some(c)) return;
      process(c);
    } else if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
      // Not reading (parked or backed up) and the client went away.
      close_connection(c, "client hung up", false);
      return;
    }
    drain_resume();
  }

  // read_some reads one chunk; false when the connection was closed. It
  // reads into one scratch buffer shared by all connections and keeps only
  // the bytes that came, so that an idle connection holds no read buffer.
  bool read_some(Connection* c) {
    ssize_t n = ::recv(c->socket.fd(), scratch.get(), kReadChunk, 0);
    if (n > 0) {
      if (c->in_pos > 0 && c->in_pos == c->in.size()) {
        c->in.clear();
        c->in_pos = 0;
      }
      c->in.insert(c->in.end(), scratch.get(), scratch.get() + n);
      return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
    close_connection(c, n == 0 ? "client closed the connection" : std::strerror(errno), false);
    return false;
  }

  // flush sends what it can of the output; false when the connection was
  // closed (an error, or close_after_flush done).
  bool flush(Connection* c) {
    const bool was_backed_up = c->buffered_out() > max_output;
    while (c->buffered_out() > 0) {
      ssize_t n = ::send(c->socket.fd(), c->out.data() + c->out_pos, c->buffered_out(), MSG_NOSIGNAL);
      if (n > 0) {
        c->out_pos += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      close_connection(c, std::string("send failed: ") + std::strerror(errno), false);
      return false;
    }
    if (c->buffered_out() == 0) {
      c->out.clear();
      c->out_pos = 0;
      if (c->close_after_flush) {
        close_connection(c, "closed after its last reply", false);
        return false;
      }
      // Requests that arrived while the replies were backed up wait unread.
      if (was_backed_up && !c->pending && c->buffered_in() > 0) resume.push_back(c->socket.fd());
    }
    update_interest(c);
    return true;
  }

  void update_interest(Connection* c) {
    bool want_read = !c->pending && !c->close_after_flush && c->buffered_out() <= max_output &&
                     c->buffered_in() <= limits.max_frame_bytes + wire::kFrameHeaderBytes;
    uint32_t events =
        EPOLLRDHUP | (want_read ? uint32_t{EPOLLIN} : 0u) | (c->buffered_out() ? uint32_t{EPOLLOUT} : 0u);
    if (events != c->interest) {
      c->interest = events;
      loop.modify(c->socket.fd(), events);
    }
  }

  void send_bytes(Connection* c, const std::vector<uint8_t>& bytes) {
    c->out.insert(c->out.end(), bytes.begin(), bytes.end());
  }

  // ---- decoding ----------------------------------------------------------

  // process decodes and answers buffered input until it runs out, the
  // connection parks, or its replies back up.
  void process(Connection* c) {
    const int fd = c->socket.fd();
    while (!c->pending && !c->close_after_flush && c->buffered_out() <= max_output) {
      const uint8_t* data = c->in.data() + c->in_pos;
      const size_t size = c->buffered_in();
      size_t used = 0;
      if (c->phase == Phase::kHello) {
        if (size < wire::kClientHelloBytes) break;
        used = wire::kClientHelloBytes;
        if (!on_hello(c, wire::decode_client_hello(data))) return;
      } else if (c->phase == Phase::kAuth) {
        if (size < wire::kClientProofBytes) break;
        used = wire::kClientProofBytes;
        Digest proof{};
        std::memcpy(proof.data(), data, proof.size());
        on_proof(c, proof);
      } else {
        auto len = wire::frame_length(data, size, limits);
        if (!len.ok()) return close_connection(c, len.status().message(), true);
        if (!len.value() || size < wire::kFrameHeaderBytes + *len.value()) break;
        used = wire::kFrameHeaderBytes + static_cast<size_t>(*len.value());
        auto request =
            wire::decode_request(data + wire::kFrameHeaderBytes, used - wire::kFrameHeaderBytes, limits);
        if (!request.ok()) return close_connection(c, request.status().message(), true);
        c->in_pos += used;
        used = 0;
        handle(c, std::move(request.value()));
      }
      c->in_pos += used;
    }
    if (find(fd) == c && flush(c)) update_interest(c);
  }

  bool on_hello(Connection* c, const wire::ClientHello& hello) {
    if (hello.magic != wire::kMagic) {
      std::ostringstream m;
      m << "wrong magic 0x" << std::hex << hello.magic << " (not a cohort store client)";
      close_connection(c, m.str(), true);
      return false;
    }
    wire::ServerHello reply;
    c->client_nonce = hello.nonce;
    if (hello.version != wire::kVersion) {
      reply.auth = wire::HelloAuth::kVersionMismatch;
      c->close_after_flush = true;
      ++counters.closed_for_protocol_errors;
      COHORT_LOG(kWarning) << "store server: client " << c->peer() << " speaks protocol version "
                           << hello.version << ", this server " << wire::kVersion;
    } else if (!token.empty()) {
      reply.auth = wire::HelloAuth::kRequired;
      c->server_nonce = random_nonce();
      reply.nonce = c->server_nonce;
      reply.proof = wire::server_proof(token, hello.nonce);
      c->phase = Phase::kAuth;
    } else {
      c->phase = Phase::kReady;
      finish_handshake(c);
    }
    send_bytes(c, wire::encode_server_hello(reply));
    return true;
  }

  void on_proof(Connection* c, const Digest& proof) {
    bool ok = digests_equal(proof, wire::client_proof(token, c->server_nonce, c->client_nonce));
    send_bytes(c, {static_cast<uint8_t>(ok ? 0 : 1)});
    if (ok) {
      c->phase = Phase::kReady;
      finish_handshake(c);
      return;
    }
    ++counters.refused_authentications;
    COHORT_LOG(kWarning) << "store server: refused client " << c->peer()
                         << ": authentication failed (its token differs from COHORT_STORE_TOKEN)";
    c->close_after_flush = true;
  }

  void finish_handshake(Connection* c) {
    if (c->handshake_timer) loop.cancel_timer(c->handshake_timer);
    c->handshake_timer = 0;
  }

  // ---- requests ----------------------------------------------------------

  void handle(Connection* c, wire::Request q) {
    std::vector<uint8_t>& out = c->out;
    switch (q.op) {
      case wire::Op::kSet:
        map.set(q.keys[0], std::move(q.values[0]));
        wire::encode_ok(&out);
        notify(q.keys[0]);
        return;
      case wire::Op::kAppend:
        map.append(q.keys[0], q.values[0]);
        wire::encode_ok(&out);
        notify(q.keys[0]);
        return;
      case wire::Op::kAdd: {
        auto r = map.add(q.keys[0], q.number);
        if (!r.ok()) return wire::encode_error(r.status(), &out);
        wire::encode_ok_number(r.value(), &out);
        notify(q.keys[0]);
        return;
      }
      case wire::Op::kCompareSet: {
        Bytes result = map.compare_set(q.keys[0], q.values[0], q.values[1]);
        wire::encode_ok_values({&result}, &out);
        notify(q.keys[0]);
        return;
      }
      case wire::Op::kCheck:
        return wire::encode_ok_number(map.missing(q.keys).empty() ? 1 : 0, &out);
      case wire::Op::kDeleteKey:
        return wire::encode_ok_number(map.erase(q.keys[0]) ? 1 : 0, &out);
      case wire::Op::kNumKeys:
        return wire::encode_ok_number(map.size(), &out);
      case wire::Op::kMultiSet:
        for (size_t i = 0; i < q.keys.size(); ++i) map.set(q.keys[i], std::move(q.values[i]));
        wire::encode_ok(&out);
        for (const auto& k : q.keys) notify(k);
        return;
      case wire::Op::kPing:
        return wire::encode_ok(&out);
      case wire::Op::kGet:
      case wire::Op::kWait:
      case wire::Op::kMultiGet:
        if (map.missing(q.keys).empty()) return answer_ready(c, q);
        return park(c, std::move(q));
    }
  }

  // answer_ready replies to a get/wait/multi_get whose keys all exist.
  void answer_ready(Connection* c, const wire::Request& q) {
    if (q.op == wire::Op::kWait) return wire::encode_ok(&c->out);
    std::vector<const Bytes*> values;
    values.reserve(q.keys.size());
    for (const auto& k : q.keys) values.push_back(map.find(k));
    wire::encode_ok_values(values, &c->out);
  }

  void park(Connection* c, wire::Request q) {
    register_missing(c, q.keys);
    const int fd = c->socket.fd();
    if (q.number > 0) {
      c->pending_timer = loop.add_timer(Clock::now() + std::chrono::milliseconds(q.number), [this, fd] {
        Connection* p = find(fd);
        if (!p || !p->pending) return;
        p->pending_timer = 0;
        wire::encode_timeout(map.missing(p->pending->keys), &p->out);
        unpark(p);
        resume.push_back(fd);
        drain_resume();
      });
    }
    c->pending = std::move(q);
    ++counters.pending_waits;
  }

  // register_missing parks c under each of `keys` that is missing now.
  void register_missing(Connection* c, const std::vector<std::string>& keys) {
    const int fd = c->socket.fd();
    for (const auto& k : map.missing(keys)) {
      if (waiters[k].insert(fd).second) ++c->pending_missing;
    }
  }

  // unpark forgets a parked request (answered, timed out or closed).
  void unpark(Connection* c) {
    if (!c->pending) return;
    const int fd = c->socket.fd();
    for (const auto& k : c->pending->keys) {
      auto it = waiters.find(k);
      if (it == waiters.end()) continue;
      it->second.erase(fd);
      if (it->second.empty()) waiters.erase(it);
    }
    if (c->pending_timer) loop.cancel_timer(c->pending_timer);
    c->pending_timer = 0;
    c->pending.reset();
    c->pending_missing = 0;
    --counters.pending_waits;
  }

  // notify wakes the connections parked on `key` whose keys now all exist.
  // Each is unregistered from `key` and counts it down; the last of its
  // keys is checked against the map once more, since a key set earlier
  // may have been deleted since (it then waits for those again).
  void notify(const std::string& key) {
    auto it = waiters.find(key);
    if (it == waiters.end()) return;
    const std::unordered_set<int> fds = std::move(it->second);
    waiters.erase(it);
    for (int fd : fds) {
      Connection* p = find(fd);
      if (!p || !p->pending) continue;
      if (p->pending_missing > 0 && --p->pending_missing > 0) continue;
      register_missing(p, p->pending->keys);
      if (p->pending_missing > 0) continue;
      answer_ready(p, *p->pending);
      unpark(p);
      resume.push_back(fd);
    }
  }

  // drain_resume sends the replies of woken connections and lets them go on
  // with input they sent meanwhile. Iterative, so that a chain of wake-ups
  // cannot grow the stack.
  void drain_resume() {
    while (!resume.empty()) {
      int fd = resume.back();
      resume.pop_back();
      Connection* c = find(fd);
      if (!c) continue;
      if (!flush(c)) continue;
      process(c);
    }
  }

  TcpStoreServerStats snapshot() const {
    TcpStoreServerStats s = counters;
    s.open_connections = static_cast<int64_t>(connections.size());
    s.keys = map.size();
    s.buffered_bytes = 0;
    for (const auto& [fd, c] : connections) {
      s.buffered_bytes += static_cast<int64_t>(c->in.capacity() + c->out.capacity());
    }
    return s;
  }
};

TcpStoreServer::TcpStoreServer(const TcpStoreServerOptions& options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.token = options.token ? *options.token : config_string(knobs::kStoreToken);
  s.limits = wire::limits_from_config();
  s.max_output = static_cast<size_t>(config_int(knobs::kStoreMaxOutputBytes));
  s.handshake_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(config_float(knobs::kStoreHandshakeTimeoutS) * 1000));
  s.loop.set_spin(std::chrono::microseconds(config_int(knobs::kStoreServerSpinUs)));
  raise_fd_limit();
  auto listener = listen_tcp(options.host, options.port);
  if (!listener.ok()) {
    throw NetworkError("store server cannot listen on " + format_address(options.host, options.port) + ": " +
                       listener.status().message());
  }
  s.listener = std::move(listener.value());
  s.port = local_port(s.listener.fd());
  s.loop.post([&s] { s.loop.watch(s.listener.fd(), EPOLLIN, [&s](uint32_t) { s.on_accept(); }); });
  s.thread = std::thread([&s] {
    try {
      s.loop.run();
    } catch (const std::exception& e) {
      COHORT_LOG(kError) << "store server on port " << s.port << " stopped: " << e.what();
    }
  });
  COHORT_LOG(kInfo) << "store server listening on " << format_address(options.host, s.port)
                    << (s.token.empty() ? "" : " (authentication required)");
}

TcpStoreServer::~TcpStoreServer() {
  state_->loop.stop();
  if (state_->thread.joinable()) state_->thread.join();
}

uint16_t TcpStoreServer::port() const {
  return state_->port;
}

TcpStoreServerStats TcpStoreServer::stats() const {
  auto promise = std::make_shared<std::promise<TcpStoreServerStats>>();
  auto future = promise->get_future();
  State* s = state_.get();
  s->loop.post([s, promise] { promise->set_value(s->snapshot()); });
  return future.get();
}

}  // namespace cohort
