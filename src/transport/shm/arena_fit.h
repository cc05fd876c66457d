// arena_fit.h (shm): where each part of an arena's segment lies for given
// ring and slot sizes, and how those sizes shrink to fit a /dev/shm that
// has no room for the asked ones.
//
// A container's /dev/shm is often small (Docker's default: 64 MiB), and an
// arena grows with the square of the host's ranks: 8 ranks with the
// default 1 MiB rings take 76 MiB. Refused, the host would talk over TCP
// (loopback: several times slower); with smaller rings and slots it keeps
// shared memory and only large messages take more turns.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cohort::shm {

// whole_pages rounds `bytes` up to whole pages: each part of the segment
// starts on one.
inline size_t whole_pages(size_t bytes) {
  return (bytes + 4095) / 4096 * 4096;
}

struct ArenaSizes {
  size_t ring_bytes = 0;  // each ring, one a direction of each pair (a power of two)
  size_t slot_bytes = 0;  // each of a rank's two slots (whole pages)
};

// ArenaLayout: the offsets in the segment, and its whole size.
struct ArenaLayout {
  ArenaSizes sizes;
  size_t controls_at = 0, ring_controls_at = 0, rings_at = 0, slots_at = 0, posts_at = 0;
  size_t total = 0;
};

ArenaLayout arena_layout(size_t local_ranks, ArenaSizes sizes);

// The smallest sizes fit_arena goes down to: a ring must still carry a
// message's header and some payload each turn, a slot a chunk worth the
// handshake that hands it over.
constexpr size_t kSmallestRingBytes = size_t{16} << 10;
constexpr size_t kSmallestSlotBytes = size_t{64} << 10;

// fit_arena returns `asked` when that arena fits in `room_bytes` (what
// /dev/shm can take: shm_room_bytes()). Else it halves the rings, then the
// slots, until the arena takes at most half the room (later groups and
// symmetric memory need some too) or both are at their smallest; the
// smallest sizes are returned where nothing smaller fits, and the segment
// is then refused if even those do not.
ArenaSizes fit_arena(size_t local_ranks, ArenaSizes asked, uint64_t room_bytes);

}  // namespace cohort::shm
