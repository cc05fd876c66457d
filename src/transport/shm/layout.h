// layout.h (shm): how an arena's segment begins: a header, then one
// control block per local rank. Private to arena.cc, arena_fit.cc and host_slots.cc.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace cohort::shm {

constexpr uint64_t kArenaMagic = 0x31414d5348434f43ull;  // "COHSMA1"

struct ArenaHeader {
  std::atomic<uint64_t> magic;  // written last by the creator
  uint64_t local_size;
  uint64_t ring_bytes;
  uint64_t slot_bytes;
  // epoch is the futex word: bumped on every arrival while someone sleeps.
  alignas(64) std::atomic<uint32_t> epoch;
  std::atomic<uint32_t> waiters;
};

struct RankControl {
  alignas(64) std::atomic<uint64_t> arrivals;
  // What this rank runs in the chunk that uses each slot half, on the same
  // cache line as `arrivals`: a peer that sees the count has the stamp
  // with it, one cache miss instead of two.
  std::atomic<uint64_t> stamp_sequence[2];
  std::atomic<uint64_t> stamp_bytes[2];
  std::atomic<uint32_t> stamp_op[2];
  std::atomic<uint64_t> stamp_word[2];
  alignas(64) std::atomic<uint32_t> sleeping;
  std::atomic<int32_t> pid;
  std::atomic<uint64_t> probe_address;  // of a word process_vm_readv may read
  // The sequence of the direct operation this rank abandoned (with an
  // error), set before its caller may free the buffers it lent to peers.
  std::atomic<uint64_t> left_at;
};
static_assert(sizeof(RankControl) == 128, "two cache lines per rank");
static_assert(offsetof(RankControl, sleeping) == 64, "arrivals and stamps share the first line");

// PostCell is one cell of a rank's ring of posts (HostSlots::post): what
// the broadcast that used it runs, then its data, which starts on the
// header's line so that a post of up to 40 bytes is one cache line.
// `sequence` is stored last (release): a reader that finds its operation's
// sequence there has the whole post without looking at the root's count.
// The other fields are atomics too (relaxed): a reader that finds an
// older sequence may read them while the writer rewrites them.
struct alignas(64) PostCell {
  std::atomic<uint64_t> sequence;
  std::atomic<uint64_t> bytes;
  std::atomic<uint32_t> op;
  uint32_t unused;
  uint8_t data[16424];
};
static_assert(sizeof(PostCell) == 16448, "257 cache lines per cell: a header line, 16 KiB of data");

}  // namespace cohort::shm
