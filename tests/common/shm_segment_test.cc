// Shared-memory segments (common/shm_segment.h): a new one takes its pages
// on first touch, not all at its creation, and one larger than /dev/shm's
// room, counting what the segments already there may still take, is
// refused at once, naming both, with nothing left behind.
#include "common/shm_segment.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace cohort {
namespace {

// allocated_bytes is what /dev/shm holds for a segment now.
int64_t allocated_bytes(const ShmSegment& s) {
  struct stat st {};
  if (::stat(("/dev/shm" + s.name()).c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_blocks) * 512;
}

bool listed(const std::string& name) {
  const auto names = live_segment_names();
  return std::find(names.begin(), names.end(), name) != names.end() ||
         std::find(names.begin(), names.end(), name.substr(1)) != names.end();
}

TEST(ShmSegment, ANewSegmentReadsZeroAndTakesItsPagesOnFirstTouch) {
  constexpr size_t kBytes = size_t{64} << 20;
  auto made = ShmSegment::create(kBytes);
  ASSERT_TRUE(made.ok()) << made.status().message();
  ShmSegment s = std::move(made.value());
  EXPECT_LT(allocated_bytes(s), int64_t{1} << 20) << "the segment's pages were reserved at its creation";
  auto* bytes = static_cast<uint8_t*>(s.data());
  EXPECT_EQ(bytes[0], 0);
  EXPECT_EQ(bytes[kBytes / 2], 0);
  EXPECT_EQ(bytes[kBytes - 1], 0);
  for (size_t i = 0; i < (size_t{8} << 20); i += 4096) bytes[i] = 1;  // 8 MiB touched
  EXPECT_GE(allocated_bytes(s), int64_t{8} << 20);
  s.unlink();
}

TEST(ShmSegment, ASegmentLargerThanDevShmsRoomIsRefusedNamingBoth) {
  struct statvfs room {};
  ASSERT_EQ(::statvfs("/dev/shm", &room), 0);
  const uint64_t free_bytes = uint64_t{room.f_bavail} * room.f_frsize;
  const size_t asked = static_cast<size_t>(free_bytes + (uint64_t{1} << 30));
  auto made = ShmSegment::create(asked);
  ASSERT_FALSE(made.ok()) << "a segment of " << asked << " bytes was made in a /dev/shm with " << free_bytes
                          << " free";
  const std::string message = made.status().message();
  EXPECT_NE(message.find("needs " + std::to_string(asked) + " bytes, but /dev/shm has "), std::string::npos)
      << message;
  EXPECT_NE(message.find("COHORT_SHM_RING_BYTES"), std::string::npos) << message;
  // Its name is the one in the message; nothing of it is left in /dev/shm.
  const size_t at = message.find("/dev/shm/");
  ASSERT_NE(at, std::string::npos) << message;
  const std::string name = message.substr(at + 8, message.find(' ', at) - at - 8);
  EXPECT_FALSE(listed(name)) << name << " was left behind";
}

// Two segments that each fit but not together: the second is refused, as
// it was when every page was reserved, rather than both made and a SIGBUS
// later when the rings fill.
TEST(ShmSegment, ASegmentThatFitsOnlyWithoutTheUnwrittenPagesOfAnotherIsRefused) {
  struct statvfs room {};
  ASSERT_EQ(::statvfs("/dev/shm", &room), 0);
  if (room.f_blocks == 0) GTEST_SKIP() << "/dev/shm has no size limit";
  const uint64_t free_bytes = uint64_t{room.f_bavail} * room.f_frsize;
  const size_t each = static_cast<size_t>(free_bytes / 10 * 6);  // 60% of what is free
  auto first = ShmSegment::create(each);
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = ShmSegment::create(each);
  ASSERT_FALSE(second.ok()) << "two segments of " << each << " bytes were made in a /dev/shm with " << free_bytes
                            << " free";
  EXPECT_NE(second.status().message().find("may still take"), std::string::npos) << second.status().message();
  first.value().unlink();
}

}  // namespace
}  // namespace cohort
