// Shared-memory segments (common/shm_segment.h): a new one takes its pages
// on first touch, not all at its creation, and one larger than /dev/shm's
// room, counting what the segments already there may still take, is
// refused at once, naming both, with nothing left behind.
#include "common/shm_segment.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
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

// An arena's doorbell is a Unix socket named after its segment
// (transport/shm/peer_signals.h); one that a crash during set-up left is
// removed with the segments of creators that are gone.
TEST(ShmSegment, ADoorbellLeftByACreatorThatIsGoneIsRemovedByTheNextSegment) {
  auto made = ShmSegment::create(4096);
  ASSERT_TRUE(made.ok()) << made.status().message();
  const std::string own = made.value().name();  // "/cohort.<uid>.<pidns>.<pid>.<serial>"
  made.value().unlink();
  const std::string pid_and_serial = std::to_string(::getpid()) + ".";
  const size_t at = own.rfind(pid_and_serial);
  ASSERT_NE(at, std::string::npos) << own;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // gone, and reaped
  const std::string name = own.substr(1, at - 1) + std::to_string(child) + ".0.bell.1";
  const std::string path = "/dev/shm/" + name;
  {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    ASSERT_LT(path.size(), sizeof address.sun_path);
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    const int fd = ::socket(AF_UNIX, SOCK_DGRAM, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0) << std::strerror(errno);
    ::close(fd);  // its name stays, as a crashed rank's would
  }
  ASSERT_TRUE(listed(name));
  auto next = ShmSegment::create(4096);
  ASSERT_TRUE(next.ok()) << next.status().message();
  next.value().unlink();
  EXPECT_FALSE(listed(name)) << path << " is still there";
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace cohort
