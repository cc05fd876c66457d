// The TcpStore client: one connection, one request in flight at a time
// (threads sharing a TcpStore take turns), blocking calls bounded by the
// server's own timer plus a grace period in case the server is frozen.
#include "cohort/tcp_store.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "cohort/errors.h"
#include "cohort/tcp_store_server.h"
#include "common/config_registry.h"
#include "common/logging.h"
#include "common/socket.h"
#include "store/key_value_map.h"
#include "store/wire_protocol.h"

namespace cohort {
namespace {

const char kWorkersKey[] = "cohort/tcpstore/workers";
const char kWorkersDoneKey[] = "cohort/tcpstore/workers_done";

// How much longer than the server's timer the client waits for a reply to a
// blocking call; only a frozen server ever uses it up.
constexpr std::chrono::seconds kReplyGrace{10};
// kReconnectWindow bounds a reconnect after a lost connection. The server
// was there and is gone, most often because the job is ending and the
// rank that hosted it left: retrying for the store's whole timeout (a
// group's is 30 minutes) would only hold up whoever asked, such as a
// rank's monitor thread publishing its progress while the rank tears down
// (whose exit then waits for it). A server back within the window is found.
constexpr std::chrono::seconds kReconnectWindow{2};

// kServerHelloWait bounds the wait for the server's hello: a cohort server
// answers it as soon as it reads the client's. Another service on the port
// (torchrun's agent hosts torch's TCPStore there) may answer nothing at all.
constexpr std::chrono::seconds kServerHelloWait{10};

constexpr size_t kInitialReadCapacity = 4096;

}  // namespace

struct TcpStore::State {
  std::string host;
  uint16_t port = 0;
  std::string address;       // "host:port", for messages
  std::string server_owner;  // "rank 0", or empty
  std::string token;
  std::unique_ptr<TcpStoreServer> server;
  std::atomic<int64_t> timeout_ms{kDefaultStoreTimeout.count()};
  wire::Limits limits{};
  std::chrono::microseconds spin{0};  // COHORT_STORE_CLIENT_SPIN_US

  std::mutex mu;  // one request at a time; guards everything below
  Socket socket;
  std::unique_ptr<uint8_t[]> in{new uint8_t[kInitialReadCapacity]};  // received bytes
  size_t in_capacity = kInitialReadCapacity;
  size_t in_pos = 0;  // in[in_pos, in_end) is received and not yet consumed
  size_t in_end = 0;
  std::vector<uint8_t> out;    // reused request buffer
  wire::ClientHello hello;     // the hello sent on this connection
  bool hello_pending = false;  // the server's hello is not read yet

  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeout_ms.load()); }

  // read_exact makes at least `n` unconsumed bytes available in `in`. It
  // grows `in` without zero-filling (a reply is usually a few bytes, and
  // thousands of clients in one process must not each touch 64 KiB).
  Status read_exact(size_t n, Deadline deadline) {
    while (in_end - in_pos < n) {
      if (in_pos > 0) {
        std::memmove(in.get(), in.get() + in_pos, in_end - in_pos);
        in_end -= in_pos;
        in_pos = 0;
      }
      if (in_capacity < n) {
        size_t capacity = std::max(n, in_capacity * 2);
        std::unique_ptr<uint8_t[]> bigger(new uint8_t[capacity]);
        std::memcpy(bigger.get(), in.get(), in_end);
        in = std::move(bigger);
        in_capacity = capacity;
      }
      auto got = recv_some(socket.fd(), in.get() + in_end, in_capacity - in_end, deadline, spin);
      if (!got.ok()) return got.status();
      in_end += got.value();
    }
    return Status::ok_status();
  }

  // handshake sends the hello. With a token it completes the challenge
  // before returning. Without one the server's hello is read later, with
  // the reply to the first request, which saves a round trip per connection
  // (the server answers nothing before the hello checks out, so nothing is
  // lost or leaked by sending early).
  Status handshake(Deadline deadline) {
    hello = wire::ClientHello();
    // The nonce matters only with a token; drawing it costs a DRBG per thread.
    if (!token.empty()) hello.nonce = random_nonce();
    hello.has_token = !token.empty();
    auto bytes = wire::encode_client_hello(hello);
    Status st = send_all(socket.fd(), bytes.data(), bytes.size(), deadline);
    // A service that resets the connection as soon as it is made never says hello.
    if (!st.ok()) return st.code() == StatusCode::kNetworkError ? not_a_store(/*silent=*/false, st) : st;
    hello_pending = true;
    if (token.empty()) return Status::ok_status();
    return finish_handshake(deadline);
  }

  // not_a_store is the error for a service that said no store hello: it
  // stayed `silent`, or hung up (`why`). torch's TCPStore (what torchrun's
  // agent hosts) closes the connection on a cohort hello it cannot parse,
  // or, with libuv, waits for more of its own protocol.
  Status not_a_store(bool silent, const Status& why) const {
    return store_error(address + " (hosted by " + (server_owner.empty() ? "an unknown owner" : server_owner) +
                       ") " +
                       (silent ? "sent no store hello within " + std::to_string(kServerHelloWait.count()) + " s"
                               : "closed the connection before any store hello (" + why.message() + ")") +
                       ": it is not a cohort store, or its server is " + (silent ? "stalled" : "failing") +
                       " (torchrun's agent hosts torch's TCPStore, which C++ programs on cohort cannot join: "
                       "launch them with cohortrun; Python programs under torchrun use torch's store and "
                       "are fine)");
  }

  // finish_handshake reads and checks the server's hello (and, with a token,
  // runs the challenge).
  Status finish_handshake(Deadline deadline) {
    hello_pending = false;
    const Deadline hello_deadline = Deadline::after(kServerHelloWait);
    const bool hello_bounded = deadline.is_never() || hello_deadline.when() < deadline.when();
    Status st = read_exact(wire::kServerHelloBytes, hello_bounded ? hello_deadline : deadline);
    // Silence and a closed connection both mean "not a cohort store".
    const bool silent = !st.ok() && st.code() == StatusCode::kTimeout && hello_bounded;
    const bool hung_up = !st.ok() && st.code() == StatusCode::kNetworkError;
    if (silent || hung_up) return not_a_store(silent, st);
    if (!st.ok()) return st;
    wire::ServerHello reply = wire::decode_server_hello(in.get() + in_pos);
    in_pos += wire::kServerHelloBytes;
    if (reply.magic != wire::kMagic) {
      return store_error(
          address + " did not answer like a cohort store (wrong magic); is another service on that port?");
    }
    if (reply.auth == wire::HelloAuth::kVersionMismatch || reply.version != wire::kVersion) {
      return store_error("the store at " + address + " speaks protocol version " +
                         std::to_string(reply.version) + "; this client speaks " +
                         std::to_string(wire::kVersion));
    }
    if (reply.auth == wire::HelloAuth::kNone) {
      if (!token.empty()) {
        return store_error(
            "this client has a store token but the store at " + address +
            " does not ask for one; refusing an unauthenticated store (give the server the same "
            "COHORT_STORE_TOKEN, or unset it here)");
      }
      return Status::ok_status();
    }
    if (token.empty()) {
      return store_error("the store at " + address +
                         " requires authentication and this client has no token: set COHORT_STORE_TOKEN (or "
                         "token= in the init URL) to the server's secret");
    }
    Digest proof = wire::client_proof(token, reply.nonce, hello.nonce);
    st = send_all(socket.fd(), proof.data(), proof.size(), deadline);
    if (st.ok()) st = read_exact(1, deadline);
    if (!st.ok()) return st;
    uint8_t verdict = in[in_pos++];
    if (verdict != 0) {
      return store_error(
          "the store at " + address +
          " refused this client: authentication failed (our COHORT_STORE_TOKEN differs from the "
          "server's)");
    }
    if (!digests_equal(reply.proof, wire::server_proof(token, hello.nonce))) {
      return store_error("the store at " + address + " could not prove that it knows the token; refusing it");
    }
    return Status::ok_status();
  }

  // connect connects within `window` (which the error names) and runs the
  // handshake; `again` says the connection had been made and was lost.
  Status connect(std::chrono::milliseconds window, bool again) {
    in_pos = in_end = 0;
    const Deadline deadline = Deadline::after(window);
    auto s = connect_tcp(host, port, deadline);
    if (!s.ok()) {
      if (s.status().code() == StatusCode::kTimeout) {
        return timeout_error("no store server answered at " + address + " within " +
                             std::to_string(window.count()) + " ms" +
                             (again ? " of the connection being lost (its server has gone)" : "") + ": " +
                             s.status().message());
      }
      return s.status();
    }
    socket = std::move(s.value());
    Status st = handshake(deadline);
    if (!st.ok()) socket.reset();
    return st;
  }

  // call sends one request and returns its reply, connecting first if
  // needed. A lost connection is a StoreError naming the store and the call;
  // the next call reconnects.
  wire::Reply call(const wire::Request& q,
                   std::chrono::milliseconds blocking_timeout = std::chrono::milliseconds(-1)) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& k : q.keys) {
      if (k.size() > limits.max_key_bytes) {
        throw InvalidArgument(
            "TcpStore " + std::string(wire::op_name(q.op)) + ": a key of " + std::to_string(k.size()) +
            " bytes exceeds COHORT_STORE_MAX_KEY_BYTES=" + std::to_string(limits.max_key_bytes));
      }
    }
    const std::string what =
        std::string(wire::op_name(q.op)) + (q.keys.empty() ? "" : " " + describe_keys(q.keys));
    if (!socket.valid()) {
      Status st = connect(std::min<std::chrono::milliseconds>(timeout(), kReconnectWindow), true);
      if (!st.ok()) throw_status(st.with_context("TcpStore " + what));
    }
    Deadline deadline = Deadline::after(timeout());
    if (blocking_timeout.count() >= 0) {
      deadline =
          blocking_timeout.count() == 0 ? Deadline::never() : Deadline::after(blocking_timeout + kReplyGrace);
    }
    out.clear();
    wire::encode_request(q, &out);
    if (out.size() - wire::kFrameHeaderBytes > limits.max_frame_bytes) {
      throw InvalidArgument(
          "TcpStore " + what + ": the request is " + std::to_string(out.size()) +
          " bytes, over COHORT_STORE_MAX_FRAME_BYTES=" + std::to_string(limits.max_frame_bytes));
    }
    Status st = send_all(socket.fd(), out.data(), out.size(), deadline);
    std::optional<uint64_t> length;
    // A service that hung up on the hello may have reset the connection
    // before the request went out: its hello (or its silence) still says
    // what it is.
    if (hello_pending && (st.ok() || st.code() == StatusCode::kNetworkError)) {
      Status hs = finish_handshake(Deadline::after(timeout()));
      if (!hs.ok() && hs.code() == StatusCode::kStoreError) {
        socket.reset();
        throw_status(hs.with_context("TcpStore " + what));
      }
      if (st.ok()) st = hs;
    }
    if (st.ok()) st = read_exact(wire::kFrameHeaderBytes, deadline);
    if (st.ok()) {
      auto len = wire::frame_length(in.get() + in_pos, in_end - in_pos, limits);
      st = len.ok() ? Status() : store_error("bad reply frame: " + len.status().message());
      if (st.ok()) length = len.value();
    }
    if (st.ok()) st = read_exact(wire::kFrameHeaderBytes + *length, deadline);
    if (!st.ok()) {
      socket.reset();
      if (st.code() == StatusCode::kNetworkError) {
        // Read from the client's side: the server went away, and who hosted it.
        throw_status(
            Status(StatusCode::kStoreError,
                   "TcpStore " + what + ": lost the store server at " + address +
                       (server_owner.empty() ? "" : ", hosted by " + server_owner) +
                       " (its process exited or was killed, or the network failed): " + st.message()));
      }
      StatusCode code = st.code() == StatusCode::kTimeout ? StatusCode::kTimeout : StatusCode::kStoreError;
      throw_status(Status(code, "TcpStore " + what + " to " + address + " failed: " + st.message()));
    }
    auto reply = wire::decode_reply(q.op, in.get() + in_pos + wire::kFrameHeaderBytes, *length, limits);
    in_pos += wire::kFrameHeaderBytes + *length;
    if (!reply.ok()) {
      socket.reset();
      throw_status(reply.status().with_context("TcpStore " + what + " to " + address));
    }
    if (reply.value().status == wire::ReplyStatus::kTimeout) {
      throw_status(wait_timeout("TcpStore at " + address, wire::op_name(q.op), reply.value().missing,
                                blocking_timeout));
    }
    if (reply.value().status == wire::ReplyStatus::kError) {
      throw_status(
          Status(reply.value().error_code, "store at " + address + ": " + reply.value().error_message));
    }
    return std::move(reply.value());
  }

  wire::Reply simple(wire::Op op, std::vector<std::string> keys, std::vector<Bytes> values = {},
                     int64_t number = 0) {
    wire::Request q;
    q.op = op;
    q.keys = std::move(keys);
    q.values = std::move(values);
    q.number = number;
    return call(q);
  }

  wire::Reply blocking(wire::Op op, std::vector<std::string> keys, std::chrono::milliseconds t) {
    wire::Request q;
    q.op = op;
    q.keys = std::move(keys);
    q.number = t.count();
    return call(q, t);
  }
};

TcpStore::TcpStore(std::string host, const TcpStoreOptions& options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  if (host.empty()) throw InvalidArgument("TcpStore: the host name is empty");
  if (options.num_workers && *options.num_workers < 1) {
    throw InvalidArgument("TcpStore: num_workers is " + std::to_string(*options.num_workers) +
                          ", expected >= 1");
  }
  s.host = std::move(host);
  s.port = options.port;
  s.token = options.token ? *options.token : config_string(knobs::kStoreToken);
  s.timeout_ms = options.timeout.count();
  s.limits = wire::limits_from_config();
  s.spin = std::chrono::microseconds(config_int(knobs::kStoreClientSpinUs));
  if (options.is_server) {
    TcpStoreServerOptions so;
    so.port = options.port;
    so.token = s.token;
    s.server = std::make_unique<TcpStoreServer>(so);
    s.port = s.server->port();
  }
  s.address = format_address(s.host, s.port);
  s.server_owner = options.server_owner;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    throw_if_error(s.connect(options.timeout, false));
  }
  if (options.num_workers && options.wait_for_workers) {
    int64_t arrived = add(kWorkersKey, 1);
    if (arrived >= *options.num_workers) set(kWorkersDoneKey, to_bytes("1"));
    if (options.is_server) {
      try {
        wait({kWorkersDoneKey}, options.timeout);
      } catch (const TimeoutError&) {
        int64_t now = add(kWorkersKey, 0);
        throw TimeoutError("TcpStore server on port " + std::to_string(s.port) + ": only " +
                           std::to_string(now) + " of " + std::to_string(*options.num_workers) +
                           " workers connected within " + std::to_string(options.timeout.count()) + " ms");
      }
    }
  }
}

TcpStore::~TcpStore() = default;

void TcpStore::set(const std::string& key, const Bytes& value) {
  state_->simple(wire::Op::kSet, {key}, {value});
}

Bytes TcpStore::get(const std::string& key) {
  auto reply = state_->blocking(wire::Op::kGet, {key}, timeout());
  return std::move(reply.values.at(0));
}

int64_t TcpStore::add(const std::string& key, int64_t amount) {
  return state_->simple(wire::Op::kAdd, {key}, {}, amount).number;
}

Bytes TcpStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  auto reply = state_->simple(wire::Op::kCompareSet, {key}, {expected, desired});
  return std::move(reply.values.at(0));
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  return state_->simple(wire::Op::kCheck, keys).number != 0;
}

void TcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  state_->blocking(wire::Op::kWait, keys, timeout);
}

bool TcpStore::delete_key(const std::string& key) {
  return state_->simple(wire::Op::kDeleteKey, {key}).number != 0;
}

int64_t TcpStore::num_keys() {
  return state_->simple(wire::Op::kNumKeys, {}).number;
}

void TcpStore::append(const std::string& key, const Bytes& value) {
  state_->simple(wire::Op::kAppend, {key}, {value});
}

std::vector<Bytes> TcpStore::multi_get(const std::vector<std::string>& keys) {
  return state_->blocking(wire::Op::kMultiGet, keys, timeout()).values;
}

void TcpStore::multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  throw_if_error(check_multi_set_sizes(keys.size(), values.size()));
  state_->simple(wire::Op::kMultiSet, keys, values);
}

std::chrono::milliseconds TcpStore::timeout() const {
  return state_->timeout();
}
void TcpStore::set_timeout(std::chrono::milliseconds timeout) {
  state_->timeout_ms = timeout.count();
}
const std::string& TcpStore::host() const {
  return state_->host;
}
uint16_t TcpStore::port() const {
  return state_->port;
}
TcpStoreServer* TcpStore::server() const {
  return state_->server.get();
}

}  // namespace cohort
