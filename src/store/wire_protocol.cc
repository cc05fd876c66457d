#include "store/wire_protocol.h"

#include "common/byte_codec.h"
#include "common/config_registry.h"

namespace cohort::wire {
namespace {

// FrameBuilder reserves the length header and fills it in once the body is
// complete, when the builder goes out of scope.
class FrameBuilder {
 public:
  explicit FrameBuilder(std::vector<uint8_t>* out) : out_(out), start_(out->size()), w_(out) {
    w_.u64(0);  // the real length is written when the builder is destroyed
  }
  ByteWriter& body() { return w_; }
  ~FrameBuilder() {
    uint64_t len = out_->size() - start_ - kFrameHeaderBytes;
    for (int i = 0; i < 8; ++i) (*out_)[start_ + i] = static_cast<uint8_t>(len >> (8 * i));
  }

 private:
  std::vector<uint8_t>* out_;
  size_t start_;
  ByteWriter w_;
};

void write_keys(ByteWriter& w, const std::vector<std::string>& keys) {
  w.u32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) w.str(k);
}

bool read_keys(ByteReader& r, const Limits& limits, std::vector<std::string>* keys) {
  uint32_t n;
  if (!r.u32(&n)) return false;
  // Each key takes at least its 4-byte length, so a count larger than that
  // is a lie; checking first keeps a hostile count from driving the loop.
  if (n > r.remaining() / 4) return false;
  for (uint32_t i = 0; i < n; ++i) {
    std::string k;
    if (!r.str(&k, limits.max_key_bytes)) return false;
    keys->push_back(std::move(k));
  }
  return true;
}

bool is_known(uint8_t op) {
  return op >= static_cast<uint8_t>(Op::kSet) && op <= static_cast<uint8_t>(Op::kPing);
}

void put_digest(ByteWriter& w, const Digest& d) {
  w.raw(d.data(), d.size());
}
Digest get_digest(ByteReader& r) {
  Digest d{};
  r.raw(d.data(), d.size());
  return d;
}

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::kSet:
      return "set";
    case Op::kGet:
      return "get";
    case Op::kAdd:
      return "add";
    case Op::kCompareSet:
      return "compare_set";
    case Op::kCheck:
      return "check";
    case Op::kWait:
      return "wait";
    case Op::kDeleteKey:
      return "delete_key";
    case Op::kNumKeys:
      return "num_keys";
    case Op::kAppend:
      return "append";
    case Op::kMultiGet:
      return "multi_get";
    case Op::kMultiSet:
      return "multi_set";
    case Op::kPing:
      return "ping";
  }
  return "unknown";
}

Limits limits_from_config() {
  return Limits{static_cast<size_t>(config_int(knobs::kStoreMaxKeyBytes)),
                static_cast<size_t>(config_int(knobs::kStoreMaxFrameBytes))};
}

void encode_request(const Request& q, std::vector<uint8_t>* out) {
  FrameBuilder f(out);
  ByteWriter& w = f.body();
  w.u8(static_cast<uint8_t>(q.op));
  switch (q.op) {
    case Op::kSet:
    case Op::kAppend:
      w.str(q.keys.at(0));
      w.bytes(q.values.at(0));
      break;
    case Op::kGet:
    case Op::kAdd:
      w.str(q.keys.at(0));
      w.i64(q.number);
      break;
    case Op::kCompareSet:
      w.str(q.keys.at(0));
      w.bytes(q.values.at(0));
      w.bytes(q.values.at(1));
      break;
    case Op::kCheck:
      write_keys(w, q.keys);
      break;
    case Op::kWait:
    case Op::kMultiGet:
      write_keys(w, q.keys);
      w.i64(q.number);
      break;
    case Op::kDeleteKey:
      w.str(q.keys.at(0));
      break;
    case Op::kMultiSet:
      w.u32(static_cast<uint32_t>(q.keys.size()));
      for (size_t i = 0; i < q.keys.size(); ++i) {
        w.str(q.keys[i]);
        w.bytes(q.values.at(i));
      }
      break;
    case Op::kNumKeys:
    case Op::kPing:
      break;
  }
}

Result<std::optional<uint64_t>> frame_length(const uint8_t* data, size_t size, const Limits& limits) {
  if (size < kFrameHeaderBytes) return std::optional<uint64_t>();
  uint64_t len;
  ByteReader(data, size).u64(&len);
  if (len == 0) return invalid_argument("empty frame (length 0)");
  if (len > limits.max_frame_bytes) {
    return invalid_argument("frame length " + std::to_string(len) + " exceeds the limit of " +
                            std::to_string(limits.max_frame_bytes) + " bytes (COHORT_STORE_MAX_FRAME_BYTES)");
  }
  return std::optional<uint64_t>(len);
}

Result<Request> decode_request(const uint8_t* body, size_t size, const Limits& limits) {
  ByteReader r(body, size);
  uint8_t code;
  if (!r.u8(&code)) return invalid_argument("empty request");
  if (!is_known(code)) return invalid_argument("unknown opcode " + std::to_string(code));
  Request q;
  q.op = static_cast<Op>(code);
  const size_t max_value = limits.max_frame_bytes;
  bool ok = true;
  auto key = [&] {
    std::string k;
    ok = ok && r.str(&k, limits.max_key_bytes);
    q.keys.push_back(std::move(k));
  };
  auto value = [&] {
    Bytes v;
    ok = ok && r.bytes(&v, max_value);
    q.values.push_back(std::move(v));
  };
  switch (q.op) {
    case Op::kSet:
    case Op::kAppend:
      key();
      value();
      break;
    case Op::kGet:
    case Op::kAdd:
      key();
      ok = ok && r.i64(&q.number);
      break;
    case Op::kCompareSet:
      key();
      value();
      value();
      break;
    case Op::kCheck:
      ok = read_keys(r, limits, &q.keys);
      break;
    case Op::kWait:
    case Op::kMultiGet:
      ok = read_keys(r, limits, &q.keys) && r.i64(&q.number);
      break;
    case Op::kDeleteKey:
      key();
      break;
    case Op::kMultiSet: {
      uint32_t n = 0;
      ok = r.u32(&n) && n <= r.remaining() / 8;
      for (uint32_t i = 0; ok && i < n; ++i) {
        key();
        value();
      }
      break;
    }
    case Op::kNumKeys:
    case Op::kPing:
      break;
  }
  if (!ok) {
    return invalid_argument(std::string("malformed ") + op_name(q.op) +
                            " request (truncated, or a key longer than COHORT_STORE_MAX_KEY_BYTES=" +
                            std::to_string(limits.max_key_bytes) + ")");
  }
  if (r.remaining() != 0) {
    return invalid_argument(std::string("malformed ") + op_name(q.op) +
                            " request: " + std::to_string(r.remaining()) + " trailing bytes");
  }
  return q;
}

void encode_ok(std::vector<uint8_t>* out) {
  FrameBuilder f(out);
  f.body().u8(static_cast<uint8_t>(ReplyStatus::kOk));
}

void encode_ok_number(int64_t number, std::vector<uint8_t>* out) {
  FrameBuilder f(out);
  f.body().u8(static_cast<uint8_t>(ReplyStatus::kOk));
  f.body().i64(number);
}

void encode_ok_values(const std::vector<const Bytes*>& values, std::vector<uint8_t>* out) {
  FrameBuilder f(out);
  f.body().u8(static_cast<uint8_t>(ReplyStatus::kOk));
  f.body().u32(static_cast<uint32_t>(values.size()));
  for (const Bytes* v : values) f.body().bytes(*v);
}

void encode_timeout(const std::vector<std::string>& missing, std::vector<uint8_t>* out) {
  FrameBuilder f(out);
  f.body().u8(static_cast<uint8_t>(ReplyStatus::kTimeout));
  write_keys(f.body(), missing);
}

void encode_error(const Status& error, std::vector<uint8_t>* out) {
  FrameBuilder f(out);
  f.body().u8(static_cast<uint8_t>(ReplyStatus::kError));
  f.body().u8(static_cast<uint8_t>(error.code()));
  f.body().str(error.message());
}

Result<Reply> decode_reply(Op op, const uint8_t* body, size_t size, const Limits& limits) {
  ByteReader r(body, size);
  Reply reply;
  uint8_t status;
  bool ok = r.u8(&status);
  if (ok && status == static_cast<uint8_t>(ReplyStatus::kTimeout)) {
    reply.status = ReplyStatus::kTimeout;
    ok = read_keys(r, limits, &reply.missing);
  } else if (ok && status == static_cast<uint8_t>(ReplyStatus::kError)) {
    reply.status = ReplyStatus::kError;
    uint8_t code;
    ok = r.u8(&code) && code <= static_cast<uint8_t>(StatusCode::kBackendError) &&
         r.str(&reply.error_message, limits.max_frame_bytes);
    if (ok) reply.error_code = static_cast<StatusCode>(code);
  } else if (ok && status == static_cast<uint8_t>(ReplyStatus::kOk)) {
    switch (op) {
      case Op::kGet:
      case Op::kCompareSet:
      case Op::kMultiGet: {
        uint32_t n;
        ok = r.u32(&n) && n <= r.remaining() / 4;
        for (uint32_t i = 0; ok && i < n; ++i) {
          Bytes v;
          ok = r.bytes(&v, limits.max_frame_bytes);
          reply.values.push_back(std::move(v));
        }
        break;
      }
      case Op::kAdd:
      case Op::kNumKeys:
      case Op::kCheck:
      case Op::kDeleteKey:
        ok = r.i64(&reply.number);
        break;
      default:
        break;
    }
  } else {
    ok = false;
  }
  if (!ok || r.remaining() != 0) {
    return store_error(std::string("malformed reply to ") + op_name(op) + " from the store server");
  }
  return reply;
}

std::vector<uint8_t> encode_client_hello(const ClientHello& h) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.u32(h.magic);
  w.u16(h.version);
  put_digest(w, h.nonce);
  w.u8(h.has_token ? 1 : 0);
  return out;
}

ClientHello decode_client_hello(const uint8_t* data) {
  ByteReader r(data, kClientHelloBytes);
  ClientHello h;
  uint8_t has_token = 0;
  r.u32(&h.magic);
  r.u16(&h.version);
  h.nonce = get_digest(r);
  r.u8(&has_token);
  h.has_token = has_token != 0;
  return h;
}

std::vector<uint8_t> encode_server_hello(const ServerHello& h) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.u32(h.magic);
  w.u16(h.version);
  w.u8(static_cast<uint8_t>(h.auth));
  put_digest(w, h.nonce);
  put_digest(w, h.proof);
  return out;
}

ServerHello decode_server_hello(const uint8_t* data) {
  ByteReader r(data, kServerHelloBytes);
  ServerHello h;
  uint8_t auth = 0;
  r.u32(&h.magic);
  r.u16(&h.version);
  r.u8(&auth);
  h.auth = static_cast<HelloAuth>(auth);
  h.nonce = get_digest(r);
  h.proof = get_digest(r);
  return h;
}

Digest server_proof(const std::string& token, const Digest& client_nonce) {
  std::vector<uint8_t> msg = {'c', 'o', 'h', 'o', 'r', 't', '-', 's', 'e', 'r', 'v', 'e', 'r'};
  msg.insert(msg.end(), client_nonce.begin(), client_nonce.end());
  return hmac_sha256(token, msg);
}

Digest client_proof(const std::string& token, const Digest& server_nonce, const Digest& client_nonce) {
  std::vector<uint8_t> msg = {'c', 'o', 'h', 'o', 'r', 't', '-', 'c', 'l', 'i', 'e', 'n', 't'};
  msg.insert(msg.end(), server_nonce.begin(), server_nonce.end());
  msg.insert(msg.end(), client_nonce.begin(), client_nonce.end());
  return hmac_sha256(token, msg);
}

}  // namespace cohort::wire
