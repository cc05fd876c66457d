// fit_arena: an arena shrinks its rings, then its slots, to fit the room
// /dev/shm has, and never below the smallest sizes.
#include "transport/shm/arena_fit.h"

#include <gtest/gtest.h>

namespace cohort::shm {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr ArenaSizes kDefaults{kMiB, 512 << 10};

TEST(ArenaFit, TheAskedSizesStayWhereTheyFit) {
  const size_t needs = arena_layout(8, kDefaults).total;
  const ArenaSizes got = fit_arena(8, kDefaults, needs);
  EXPECT_EQ(got.ring_bytes, kDefaults.ring_bytes);
  EXPECT_EQ(got.slot_bytes, kDefaults.slot_bytes);
}

TEST(ArenaFit, EightRanksInADockerSizedDevShmHalveTheirRingsAndKeepTheirSlots) {
  const uint64_t docker = 64 * kMiB;
  ASSERT_GT(arena_layout(8, kDefaults).total, docker) << "the defaults fit 64 MiB: this test shows nothing";
  const ArenaSizes got = fit_arena(8, kDefaults, docker);
  EXPECT_EQ(got.slot_bytes, kDefaults.slot_bytes) << "the rings alone could make room";
  EXPECT_LT(got.ring_bytes, kDefaults.ring_bytes);
  EXPECT_EQ(got.ring_bytes & (got.ring_bytes - 1), 0u) << got.ring_bytes << " is not a power of two";
  EXPECT_LE(arena_layout(8, got).total, docker / 2) << "it leaves later groups half the room";
  // The largest rings that do: twice as large would not.
  EXPECT_GT(arena_layout(8, {got.ring_bytes * 2, got.slot_bytes}).total, docker / 2);
}

TEST(ArenaFit, SlotsShrinkOnceTheRingsAreAtTheirSmallest) {
  const ArenaSizes least{kSmallestRingBytes, kDefaults.slot_bytes};
  const uint64_t room = arena_layout(4, least).total;  // half of it holds less than the least rings
  const ArenaSizes got = fit_arena(4, kDefaults, room);
  EXPECT_EQ(got.ring_bytes, kSmallestRingBytes);
  EXPECT_LT(got.slot_bytes, kDefaults.slot_bytes);
  EXPECT_GE(got.slot_bytes, kSmallestSlotBytes);
  EXPECT_EQ(got.slot_bytes % 4096, 0u) << "slots are whole pages";
}

TEST(ArenaFit, WithoutRoomForTheSmallestItAsksForTheSmallest) {
  const ArenaSizes got = fit_arena(2, kDefaults, 4096);
  EXPECT_EQ(got.ring_bytes, kSmallestRingBytes);
  EXPECT_EQ(got.slot_bytes, kSmallestSlotBytes);
  EXPECT_GT(arena_layout(2, got).total, 4096u) << "then the segment is refused and the host uses TCP";
}

TEST(ArenaFit, SizesAskedBelowTheSmallestAreNotRaised) {
  const ArenaSizes small{4096, 8192};
  const ArenaSizes got = fit_arena(2, small, 4096);
  EXPECT_EQ(got.ring_bytes, small.ring_bytes);
  EXPECT_EQ(got.slot_bytes, small.slot_bytes);
}

TEST(ArenaFit, TheLayoutPlacesEachPartAfterTheLast) {
  const ArenaLayout a = arena_layout(3, {64 << 10, 128 << 10});
  EXPECT_LT(a.controls_at, a.ring_controls_at);
  EXPECT_LT(a.ring_controls_at, a.rings_at);
  EXPECT_EQ(a.slots_at - a.rings_at, 9 * (64u << 10));
  EXPECT_EQ(a.posts_at - a.slots_at, 3 * 2 * (128u << 10));
  EXPECT_GT(a.total, a.posts_at);
}

}  // namespace
}  // namespace cohort::shm
