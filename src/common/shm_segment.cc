#include "common/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/logging.h"

namespace cohort {
namespace {

// The name prefix of this user's segments in this pid namespace: a
// creator's pid means something only inside its own pid namespace.
std::string own_prefix() {
  struct stat st {};
  unsigned long long pidns = 0;
  if (::stat("/proc/self/ns/pid", &st) == 0) pidns = static_cast<unsigned long long>(st.st_ino);
  return "cohort." + std::to_string(::getuid()) + "." + std::to_string(pidns) + ".";
}

// each_entry calls `visit(dir, entry)` for every entry of /dev/shm.
template <class Visit>
void each_entry(Visit visit) {
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return;
  while (dirent* e = ::readdir(dir)) visit(dir, e);
  ::closedir(dir);
}

// promised_bytes is what the files in /dev/shm may still take: the part
// of each that is sized but not yet written (holes of sparse segments,
// this process's and other jobs' alike; a file reserved in full adds
// nothing, its pages already count as used).
uint64_t promised_bytes() {
  uint64_t promised = 0;
  each_entry([&](DIR* dir, const dirent* e) {
    struct stat st {};
    if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return;
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    const uint64_t held = static_cast<uint64_t>(st.st_blocks) * 512;
    if (size > held) promised += size - held;
  });
  return promised;
}

// room_in reads the room of the file system `fd` is on (a file in
// /dev/shm, or the directory): free bytes and what the segments there may
// still take; false for a tmpfs without a size limit (size=0 reports no
// blocks at all) or one that cannot be read.
bool room_in(int fd, uint64_t* free_bytes, uint64_t* promised) {
  struct statvfs room {};
  if (::fstatvfs(fd, &room) != 0 || room.f_blocks == 0) return false;
  *free_bytes = static_cast<uint64_t>(room.f_bavail) * room.f_frsize;
  *promised = promised_bytes();
  return true;
}

// room_problem says why /dev/shm cannot hold a new segment of `bytes`
// (not sized yet, so not among the promised bytes), or "" when it can.
std::string room_problem(int fd, size_t bytes) {
  uint64_t free_bytes = 0, promised = 0;
  if (!room_in(fd, &free_bytes, &promised) || promised + bytes <= free_bytes) return "";
  return "needs " + std::to_string(bytes) + " bytes, but /dev/shm has " + std::to_string(free_bytes) +
         " free and the segments there may still take " + std::to_string(promised) +
         " (make /dev/shm larger, or set COHORT_SHM_RING_BYTES lower)";
}

Status shm_error(const std::string& what, const std::string& name) {
  return Status(StatusCode::kBackendError,
                what + " shared-memory segment /dev/shm" + name + " failed: " + std::strerror(errno));
}

}  // namespace

ShmSegment::~ShmSegment() {
  if (data_) ::munmap(data_, size_);
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : data_(other.data_), size_(other.size_), name_(std::move(other.name_)), linked_(other.linked_) {
  other.data_ = nullptr;
  other.size_ = 0;
  other.linked_ = false;
}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, size_);
    data_ = other.data_;
    size_ = other.size_;
    name_ = std::move(other.name_);
    linked_ = other.linked_;
    other.data_ = nullptr;
    other.size_ = 0;
    other.linked_ = false;
  }
  return *this;
}

Result<ShmSegment> ShmSegment::create(size_t bytes) {
  remove_stale_segments();
  static std::atomic<unsigned> serial{0};
  ShmSegment s;
  s.name_ = "/" + own_prefix() + std::to_string(::getpid()) + "." + std::to_string(serial++);
  int fd = ::shm_open(s.name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return shm_error("creating", s.name_);
  // The pages come on first touch, as Open MPI's segments do; most of a
  // ring is never written by a job of small messages. Reserving them all
  // now (posix_fallocate, as NCCL does) zeroed the whole segment at every
  // group's creation and freed it at its end: 80 of the 107 ms sixteen
  // ranks took to join here (bench/join_bench.sh). What is kept of the
  // reservation is its check: the segment must fit in /dev/shm beside
  // what the segments already there may still take (every group's arena
  // and block, unwritten), or it is an error now and the host falls back
  // to TCP. Only segments made at the same moment, or a /dev/shm filled
  // by other writers later, can still end in a SIGBUS. Checked before the
  // segment is sized: a refused one is never among what another segment
  // made meanwhile finds promised (two tests made one of 64 MiB and one
  // larger than /dev/shm at once, and both were refused).
  const std::string no_room = room_problem(fd, bytes);
  if (!no_room.empty()) {
    Status st(StatusCode::kBackendError, "shared-memory segment /dev/shm" + s.name_ + " " + no_room);
    ::close(fd);
    ::shm_unlink(s.name_.c_str());
    return st;
  }
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    Status st = shm_error("sizing", s.name_);
    ::close(fd);
    ::shm_unlink(s.name_.c_str());
    return st;
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    Status st = shm_error("mapping", s.name_);
    ::shm_unlink(s.name_.c_str());
    return st;
  }
  s.data_ = p;
  s.size_ = bytes;
  s.linked_ = true;
  return s;
}

Result<ShmSegment> ShmSegment::open(const std::string& name, size_t bytes) {
  ShmSegment s;
  s.name_ = name;
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return shm_error("opening", name);
  struct stat st {};
  const bool stated = ::fstat(fd, &st) == 0;
  if (stated && bytes == 0) bytes = static_cast<size_t>(st.st_size);
  if (!stated || static_cast<size_t>(st.st_size) != bytes || bytes == 0) {
    ::close(fd);
    return Status(StatusCode::kBackendError, "shared-memory segment /dev/shm" + name + " is " +
                                                 std::to_string(st.st_size) + " bytes, expected " +
                                                 std::to_string(bytes));
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return shm_error("mapping", name);
  s.data_ = p;
  s.size_ = bytes;
  s.linked_ = true;
  return s;
}

void ShmSegment::unlink() {
  if (!linked_) return;
  if (::shm_unlink(name_.c_str()) != 0 && errno != ENOENT) {
    COHORT_LOG(kWarning) << "could not remove shared-memory segment /dev/shm" << name_ << ": "
                         << std::strerror(errno);
  }
  linked_ = false;
}

uint64_t shm_room_bytes() {
  const int fd = ::open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return UINT64_MAX;
  uint64_t free_bytes = 0, promised = 0;
  const bool limited = room_in(fd, &free_bytes, &promised);
  ::close(fd);
  if (!limited) return UINT64_MAX;
  return free_bytes > promised ? free_bytes - promised : 0;
}

std::vector<std::string> live_segment_names() {
  std::vector<std::string> names;
  const std::string prefix = own_prefix();
  each_entry([&](DIR*, const dirent* e) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) names.emplace_back(e->d_name);
  });
  return names;
}

int remove_stale_segments() {
  const std::string prefix = own_prefix();
  int removed = 0;
  for (const std::string& name : live_segment_names()) {
    const pid_t creator = static_cast<pid_t>(std::atol(name.c_str() + prefix.size()));
    if (creator <= 0 || ::kill(creator, 0) == 0 || errno != ESRCH) continue;
    if (::shm_unlink(("/" + name).c_str()) == 0) {
      ++removed;
      COHORT_LOG(kInfo) << "removed /dev/shm/" << name << ", left behind by process " << creator
                        << " which no longer exists";
    }
  }
  return removed;
}

}  // namespace cohort
