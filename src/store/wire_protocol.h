// wire_protocol.h: the bytes a TcpStore client and server exchange.
//
// Described for people in docs/store_protocol.md. In short: a fixed-size
// hello each way (magic, version, nonces; HMAC proofs when a token is
// configured), then frames: a u64 little-endian body length followed by the
// body. A request body is an opcode and its arguments; a reply body is a
// status byte and its payload. Decoding is pure (no I/O), bounded by Limits,
// and never trusts a length: this is the code the fuzzer exercises.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cohort/store.h"
#include "common/hmac.h"
#include "common/status.h"

namespace cohort::wire {

constexpr uint32_t kMagic = 0x54534843;  // the bytes "CHST"
constexpr uint16_t kVersion = 1;
constexpr size_t kFrameHeaderBytes = 8;

enum class Op : uint8_t {
  kSet = 1,
  kGet = 2,
  kAdd = 3,
  kCompareSet = 4,
  kCheck = 5,
  kWait = 6,
  kDeleteKey = 7,
  kNumKeys = 8,
  kAppend = 9,
  kMultiGet = 10,
  kMultiSet = 11,
  kPing = 12,
};

// op_name returns the Store method an opcode stands for ("get", ...).
const char* op_name(Op op);

enum class ReplyStatus : uint8_t { kOk = 0, kTimeout = 1, kError = 2 };

// Limits bound what a decoder accepts.
struct Limits {
  size_t max_key_bytes;
  size_t max_frame_bytes;
};

// limits_from_config reads COHORT_STORE_MAX_KEY_BYTES and _MAX_FRAME_BYTES.
Limits limits_from_config();

// Request is one decoded request. `number` is the amount of add and the
// timeout in milliseconds of get, wait and multi_get (0: none).
struct Request {
  Op op = Op::kPing;
  std::vector<std::string> keys;
  std::vector<Bytes> values;
  int64_t number = 0;
};

// encode_request appends a whole frame (header and body) to `out`.
void encode_request(const Request& request, std::vector<uint8_t>* out);

// frame_length reads the body length from the first 8 bytes of `data` and
// checks it against `limits`. Returns nullopt when fewer than 8 bytes are
// there; fails with kInvalidArgument when the length is too large.
Result<std::optional<uint64_t>> frame_length(const uint8_t* data, size_t size, const Limits& limits);

// decode_request decodes a frame body. Fails with kInvalidArgument saying
// what is wrong (unknown opcode, truncated, oversized key, trailing bytes).
Result<Request> decode_request(const uint8_t* body, size_t size, const Limits& limits);

// Reply is one decoded reply.
struct Reply {
  ReplyStatus status = ReplyStatus::kOk;
  std::vector<Bytes> values;                        // get, compare_set, multi_get
  int64_t number = 0;                               // add, num_keys, check and delete_key (0/1)
  std::vector<std::string> missing;                 // kTimeout: keys still missing
  StatusCode error_code = StatusCode::kStoreError;  // kError
  std::string error_message;                        // kError
};

// Reply encoders append a whole frame to `out`.
void encode_ok(std::vector<uint8_t>* out);
void encode_ok_number(int64_t number, std::vector<uint8_t>* out);
void encode_ok_values(const std::vector<const Bytes*>& values, std::vector<uint8_t>* out);
void encode_timeout(const std::vector<std::string>& missing, std::vector<uint8_t>* out);
void encode_error(const Status& error, std::vector<uint8_t>* out);

// decode_reply decodes the body of a reply to a request of kind `op`.
Result<Reply> decode_reply(Op op, const uint8_t* body, size_t size, const Limits& limits);

// The handshake. Client hello: magic u32, version u16, client nonce (32),
// has_token u8. Server hello: magic u32, version u16, auth u8 (see
// HelloAuth), server nonce (32), server proof (32). When auth is kRequired,
// the client then sends its proof (32) and the server answers one byte:
// 0 accepted, 1 refused.
constexpr size_t kClientHelloBytes = 4 + 2 + 32 + 1;
constexpr size_t kServerHelloBytes = 4 + 2 + 1 + 32 + 32;
constexpr size_t kClientProofBytes = 32;

enum class HelloAuth : uint8_t { kNone = 0, kRequired = 1, kVersionMismatch = 2 };

struct ClientHello {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  Digest nonce{};
  bool has_token = false;
};

struct ServerHello {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  HelloAuth auth = HelloAuth::kNone;
  Digest nonce{};
  Digest proof{};
};

std::vector<uint8_t> encode_client_hello(const ClientHello& hello);
ClientHello decode_client_hello(const uint8_t* data);  // kClientHelloBytes
std::vector<uint8_t> encode_server_hello(const ServerHello& hello);
ServerHello decode_server_hello(const uint8_t* data);  // kServerHelloBytes

// server_proof and client_proof are the HMACs each side shows: the server
// signs the client's nonce, the client signs both nonces, each with a
// different label so that one proof can never be replayed as the other.
Digest server_proof(const std::string& token, const Digest& client_nonce);
Digest client_proof(const std::string& token, const Digest& server_nonce, const Digest& client_nonce);

}  // namespace cohort::wire
