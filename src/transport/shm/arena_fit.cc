#include "transport/shm/arena_fit.h"

#include <algorithm>

#include "transport/shm/host_slots.h"
#include "transport/shm/layout.h"
#include "transport/shm/ring.h"

namespace cohort::shm {

ArenaLayout arena_layout(size_t l, ArenaSizes sizes) {
  ArenaLayout a;
  a.sizes = sizes;
  a.controls_at = whole_pages(sizeof(ArenaHeader));
  a.ring_controls_at = a.controls_at + whole_pages(l * sizeof(RankControl));
  a.rings_at = a.ring_controls_at + whole_pages(l * l * sizeof(RingControl));
  a.slots_at = a.rings_at + l * l * sizes.ring_bytes;
  a.posts_at = a.slots_at + l * 2 * sizes.slot_bytes;
  a.total = a.posts_at + l * HostSlots::kPosts * sizeof(PostCell);
  return a;
}

ArenaSizes fit_arena(size_t l, ArenaSizes asked, uint64_t room_bytes) {
  if (arena_layout(l, asked).total <= room_bytes) return asked;
  ArenaSizes s = asked;
  const auto fits_half = [&] { return arena_layout(l, s).total <= room_bytes / 2; };
  while (!fits_half() && s.ring_bytes > kSmallestRingBytes) {
    s.ring_bytes = std::max(kSmallestRingBytes, s.ring_bytes / 2);
  }
  while (!fits_half() && s.slot_bytes > kSmallestSlotBytes) {
    s.slot_bytes = std::max(kSmallestSlotBytes, whole_pages(s.slot_bytes / 2));
  }
  return s;
}

}  // namespace cohort::shm
