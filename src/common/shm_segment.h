// shm_segment.h: POSIX shared-memory segments that never outlive their job.
//
// A segment's name records who made it: /dev/shm/cohort.<uid>.<pid
// namespace>.<creator pid>.<serial>. Whoever maps it last unlinks the name
// (the mapping stays valid), so a normal run leaves nothing behind; a run
// that was killed before every rank mapped may leave a name, which the next
// segment created by the same user on the host removes once its creator
// process is gone (remove_stale_segments).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace cohort {

class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // create makes a new segment of `bytes` (zero-filled) under a fresh name.
  static Result<ShmSegment> create(size_t bytes);
  // open maps an existing segment by name; it must be exactly `bytes` long
  // (0: whatever its creator made it).
  static Result<ShmSegment> open(const std::string& name, size_t bytes);

  // unlink removes the name; the mapping stays. Idempotent; a name already
  // removed by another process is not an error.
  void unlink();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  // name stays known after unlink (the arena names its doorbells by it).
  const std::string& name() const { return name_; }
  bool valid() const { return data_ != nullptr; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  bool linked_ = false;  // until unlink
};

// remove_stale_segments unlinks this user's segments (of this pid
// namespace) whose creator process no longer exists, and the arena
// doorbells named after them (transport/shm/peer_signals.h) that a crash
// during set-up left; returns how many.
int remove_stale_segments();

// shm_room_bytes is how large a segment /dev/shm can take now: what is
// free there less what the segments already there may still take (their
// unwritten pages); UINT64_MAX where /dev/shm has no size limit (or none
// can be read). create() refuses a segment larger than this.
uint64_t shm_room_bytes();

// live_segment_names lists this user's segment names now in /dev/shm,
// doorbells included (for tests and cohort-info).
std::vector<std::string> live_segment_names();

}  // namespace cohort
