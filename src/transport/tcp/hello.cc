#include "transport/tcp/hello.h"

#include <algorithm>
#include <cstring>

#include "common/byte_codec.h"
#include "common/socket.h"

namespace cohort::tcp {
namespace {

constexpr uint32_t kHelloMagic = 0x324c4843;  // "CHL2": the hello with a nonce
constexpr size_t kFixedBytes = 4 + 4 + 4 + 32 + 32 + 2;
constexpr size_t kMaxIdentityBytes = 1024;

std::string rank_text(int rank) {
  return "rank " + std::to_string(rank);
}

}  // namespace

Hello make_hello(const GroupCredentials& mine, int from, int to, int size) {
  Hello h;
  h.rank = from;
  h.size = size;
  h.nonce = mine.nonce;
  if (!mine.token.empty()) {
    std::vector<uint8_t> msg;
    ByteWriter w(&msg);
    w.str("cohort data-plane hello");
    w.raw(mine.nonce.data(), mine.nonce.size());
    w.u32(static_cast<uint32_t>(from));
    w.u32(static_cast<uint32_t>(to));
    w.u32(static_cast<uint32_t>(size));
    h.proof = hmac_sha256(mine.token, msg);
  }
  h.identity = mine.identity.substr(0, kMaxIdentityBytes);
  return h;
}

std::vector<uint8_t> encode_hello(const Hello& hello) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.u32(kHelloMagic);
  w.u32(static_cast<uint32_t>(hello.rank));
  w.u32(static_cast<uint32_t>(hello.size));
  w.raw(hello.nonce.data(), hello.nonce.size());
  w.raw(hello.proof.data(), hello.proof.size());
  const size_t n = std::min(hello.identity.size(), kMaxIdentityBytes);
  w.u16(static_cast<uint16_t>(n));
  w.raw(hello.identity.data(), n);
  return out;
}

size_t hello_bytes_needed(const uint8_t* data, size_t have) {
  if (have >= 4) {
    ByteReader r(data, have);
    uint32_t magic = 0;
    r.u32(&magic);
    if (magic != kHelloMagic) return 0;
  }
  if (have < kFixedBytes) return kFixedBytes;
  ByteReader r(data + kFixedBytes - 2, 2);
  uint16_t identity = 0;
  r.u16(&identity);
  if (identity > kMaxIdentityBytes) return 0;
  return kFixedBytes + identity;
}

Hello decode_hello(const uint8_t* data, size_t n) {
  Hello h;
  ByteReader r(data, n);
  uint32_t magic = 0, rank = 0, size = 0;
  uint16_t identity = 0;
  r.u32(&magic);
  r.u32(&rank);
  r.u32(&size);
  r.raw(h.nonce.data(), h.nonce.size());
  r.raw(h.proof.data(), h.proof.size());
  r.u16(&identity);
  h.rank = static_cast<int>(std::min<uint32_t>(rank, 1u << 30));
  h.size = static_cast<int>(std::min<uint32_t>(size, 1u << 30));
  const size_t shown = std::min<size_t>(identity, n - std::min(n, kFixedBytes));
  h.identity.assign(reinterpret_cast<const char*>(data) + std::min(n, kFixedBytes), shown);
  return h;
}

std::optional<Refusal> judge_hello(const Hello& hello, const GroupCredentials& mine, int me, int size,
                                   bool connected) {
  if (hello.size != size) return Refusal::kWorldSize;
  if (hello.rank < 0 || hello.rank >= size || hello.rank == me) return Refusal::kRankOutOfRange;
  if (!digests_equal(hello.nonce, mine.nonce)) return Refusal::kOtherGroup;
  if (!mine.token.empty()) {
    const Hello expected = make_hello(mine, hello.rank, me, size);
    if (!digests_equal(hello.proof, expected.proof)) return Refusal::kBadProof;
  }
  if (connected) return Refusal::kSeatTaken;
  return std::nullopt;
}

namespace {

// Each refusal in the acceptor's words and in the caller's.
struct RefusalWords {
  Refusal why;
  const char* ours;    // after "rank A refused a connection from ...: "
  const char* theirs;  // after "rank A ... refused this process as rank C: "
};

constexpr RefusalWords kRefusalWords[] = {
    {Refusal::kWorldSize, "another world size", "its group has another world size"},
    {Refusal::kRankOutOfRange, "that is no other rank of this group",
     "it takes this rank for no peer of its group"},
    {Refusal::kOtherGroup, "it did not join through this group's store (another job, or a stale address)",
     "it belongs to another group or job (this process did not join through its store: two jobs on one "
     "MASTER_PORT, or an address left from an earlier group?)"},
    {Refusal::kBadProof, "it could not prove that it knows COHORT_STORE_TOKEN",
     "this process's COHORT_STORE_TOKEN is not the one it holds"},
    {Refusal::kSeatTaken, "that rank is connected already",
     "another process holds this rank's connection to it (a RANK given twice?)"},
};

const RefusalWords& words_for(Refusal why) {
  for (const RefusalWords& w : kRefusalWords) {
    if (w.why == why) return w;
  }
  return kRefusalWords[0];
}

}  // namespace

std::string refused_by_us(Refusal why, const Hello& hello, int me, int size) {
  return rank_text(me) + " refused a connection from " + (hello.identity.empty() ? "?" : hello.identity) +
         ", calling itself rank " + std::to_string(hello.rank) + " of " + std::to_string(hello.size) + ": " +
         words_for(why).ours + " (this group has " + std::to_string(size) + " ranks)";
}

std::string refused_by_them(Refusal why, int me, int them, const std::string& their_address,
                            const std::string& their_identity) {
  return rank_text(them) + " at " + their_address + " (" + (their_identity.empty() ? "?" : their_identity) +
         ") refused this process as " + rank_text(me) + ": " + words_for(why).theirs;
}

std::vector<uint8_t> encode_refusal(Refusal why, const std::string& identity) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.u8(static_cast<uint8_t>(HelloVerdict::kRefused));
  w.u8(static_cast<uint8_t>(why));
  const size_t n = std::min(identity.size(), kMaxIdentityBytes);
  w.u16(static_cast<uint16_t>(n));
  w.raw(identity.data(), n);
  return out;
}

Result<std::pair<Refusal, std::string>> read_refusal(int fd, Deadline deadline) {
  uint8_t head[3];
  Status st = recv_all(fd, head, sizeof head, deadline);
  if (!st.ok()) return st;
  ByteReader r(head, sizeof head);
  uint8_t why = 0;
  uint16_t n = 0;
  r.u8(&why);
  r.u16(&n);
  if (why < static_cast<uint8_t>(Refusal::kWorldSize) || why > static_cast<uint8_t>(Refusal::kSeatTaken) ||
      n > kMaxIdentityBytes) {
    return network_error("a peer refused this process's hello with an answer that is not cohort's");
  }
  std::string identity(n, '\0');
  st = recv_all(fd, reinterpret_cast<uint8_t*>(identity.data()), n, deadline);
  if (!st.ok()) return st;
  return std::make_pair(static_cast<Refusal>(why), identity);
}

}  // namespace cohort::tcp
