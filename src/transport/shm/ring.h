// ring.h: a single-producer, single-consumer byte stream in shared memory.
//
// One ring carries everything one rank sends to one other rank on the same
// host, framed exactly like the bytes of a TCP connection, so the stream
// engine (tcp/transport.cc) treats it as a socket that never blocks in the
// kernel. head counts bytes ever written, tail bytes ever read; each is
// written by one side only, on its own cache line. No lock, no system call.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cohort::shm {

struct RingControl {
  alignas(64) std::atomic<uint64_t> head;  // written by the producer
  // closed is set by the producer once it writes no more (its link shut
  // down): the reader's end-of-file, after what the ring still holds. On
  // head's line, which a reader that finds the ring empty has just read.
  std::atomic<uint32_t> closed;
  alignas(64) std::atomic<uint64_t> tail;  // written by the consumer
};
static_assert(sizeof(RingControl) == 128, "head and tail on cache lines of their own");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "atomics in shared memory must be lock-free");

class Ring {
 public:
  Ring() = default;
  // `capacity` must be a power of two.
  Ring(RingControl* control, uint8_t* data, size_t capacity)
      : control_(control), data_(data), mask_(capacity - 1) {}

  bool valid() const { return control_ != nullptr; }

  // write copies as much of iov[0..n) as fits and returns the byte count.
  size_t write(const iovec* iov, size_t n) {
    const uint64_t head = control_->head.load(std::memory_order_relaxed);
    const uint64_t tail = control_->tail.load(std::memory_order_acquire);
    size_t room = mask_ + 1 - static_cast<size_t>(head - tail);
    uint64_t at = head;
    for (size_t i = 0; i < n && room > 0; ++i) {
      size_t len = std::min(room, iov[i].iov_len);
      copy_in(at, static_cast<const uint8_t*>(iov[i].iov_base), len);
      at += len;
      room -= len;
    }
    if (at != head) control_->head.store(at, std::memory_order_release);
    return static_cast<size_t>(at - head);
  }

  // room is how many bytes write() would take now.
  size_t room() const {
    return mask_ + 1 -
           static_cast<size_t>(control_->head.load(std::memory_order_relaxed) -
                               control_->tail.load(std::memory_order_acquire));
  }

  // read copies up to n bytes out and returns how many.
  size_t read(void* out, size_t n) {
    const uint64_t tail = control_->tail.load(std::memory_order_relaxed);
    const uint64_t head = control_->head.load(std::memory_order_acquire);
    size_t len = std::min(n, static_cast<size_t>(head - tail));
    if (len == 0) return 0;
    const size_t at = static_cast<size_t>(tail) & mask_;
    const size_t first = std::min(len, mask_ + 1 - at);
    std::memcpy(out, data_ + at, first);
    if (len > first) std::memcpy(static_cast<uint8_t*>(out) + first, data_, len - first);
    control_->tail.store(tail + len, std::memory_order_release);
    return len;
  }

  // close tells the reader that nothing more will come (its end-of-file).
  void close() { control_->closed.store(1, std::memory_order_release); }
  // closed is true once the writer closed; bytes it wrote before are still
  // there to read (read them after seeing it, since they may have come
  // between an empty read and this look).
  bool closed() const { return control_->closed.load(std::memory_order_acquire) != 0; }

  // readable is how many bytes read() would give now.
  size_t readable() const {
    return static_cast<size_t>(control_->head.load(std::memory_order_acquire) -
                               control_->tail.load(std::memory_order_relaxed));
  }

 private:
  void copy_in(uint64_t position, const uint8_t* src, size_t len) {
    const size_t at = static_cast<size_t>(position) & mask_;
    const size_t first = std::min(len, mask_ + 1 - at);
    std::memcpy(data_ + at, src, first);
    if (len > first) std::memcpy(data_, src + first, len - first);
  }

  RingControl* control_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t mask_ = 0;
};

}  // namespace cohort::shm
