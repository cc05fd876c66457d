// hello.h (tcp): the first bytes on every data-plane connection, in one
// format for eager (connect.cc) and lazy (lazy_connect.cc) connections.
//
// The caller says which rank of which group it is: rank, world size, the
// group's nonce (random, agreed through the store when the ranks claim
// their seats, so a process that did not join through this group's store,
// such as one of another job holding a stale address or a reused port,
// cannot pass for a peer), an HMAC of that nonce under COHORT_STORE_TOKEN
// when one is set (so knowing the nonce is not enough without the secret),
// and who it is ("pid 123 on host h of job j") for messages.
//
// The acceptor answers one byte: kWelcome, kUseYours (lazy connections
// only: both sides called at once and the lower rank keeps its own), or
// kRefused followed by why and who refused, so that both sides can say
// what happened from their own point of view.
//
// Wire (little-endian): magic u32, rank u32, size u32, nonce (32), proof
// (32), identity length u16, identity. The proof binds sender, receiver
// and size; a replayed hello can only claim a seat its sender holds, which
// the acceptor refuses as a duplicate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/hmac.h"
#include "common/status.h"

namespace cohort::tcp {

// GroupCredentials are what this rank shows its peers and expects of them.
struct GroupCredentials {
  Digest nonce{};        // the group's, from claim_seat
  std::string token;     // COHORT_STORE_TOKEN; empty: hellos carry no proof
  std::string identity;  // this process, for messages (describe_this_process)
};

struct Hello {
  int rank = 0;
  int size = 0;
  Digest nonce{};
  Digest proof{};
  std::string identity;
};

// make_hello is what rank `from` of `size` says when it calls rank `to`.
Hello make_hello(const GroupCredentials& mine, int from, int to, int size);
std::vector<uint8_t> encode_hello(const Hello& hello);

// hello_bytes_needed is how many bytes the hello starting at `data` takes,
// as far as `have` bytes tell: the fixed part first, then all of it. 0 when
// the bytes are not a hello (wrong magic).
size_t hello_bytes_needed(const uint8_t* data, size_t have);
// decode_hello reads a complete hello (hello_bytes_needed bytes).
Hello decode_hello(const uint8_t* data, size_t n);

enum class HelloVerdict : uint8_t { kUseYours = 0, kWelcome = 1, kRefused = 2 };

// Why an acceptor refuses a hello.
enum class Refusal : uint8_t { kWorldSize = 1, kRankOutOfRange, kOtherGroup, kBadProof, kSeatTaken };

// judge_hello is the acceptor's verdict on `hello` (rank `me` of `size`):
// nullopt when it comes from a peer of this group, else why not. A peer
// that already has a connection (`connected`) is kSeatTaken.
std::optional<Refusal> judge_hello(const Hello& hello, const GroupCredentials& mine, int me, int size,
                                   bool connected);

// refused_by_us words a refusal for the acceptor's log; refused_by_them
// for the caller's error, naming the acceptor and who it is.
std::string refused_by_us(Refusal why, const Hello& hello, int me, int size);
std::string refused_by_them(Refusal why, int me, int them, const std::string& their_address,
                            const std::string& their_identity);

// encode_refusal: kRefused, the reason, and the acceptor's identity
// (length u16, then the text).
std::vector<uint8_t> encode_refusal(Refusal why, const std::string& identity);

// read_refusal reads the rest of a refusal (after its verdict byte) from a
// socket, by `deadline`: the reason and the acceptor's identity.
Result<std::pair<Refusal, std::string>> read_refusal(int fd, Deadline deadline);

}  // namespace cohort::tcp
