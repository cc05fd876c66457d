// buffer_pool.h: large buffers kept for reuse instead of given back to the
// system.
//
// A fresh 16 MiB buffer costs 4096 page faults (the kernel zeroes every
// page) the first time it is written: as much as copying the 16 MiB. RPC
// receives every tensor into a new buffer, so it takes them from here and
// the tensor's deleter brings them back. Buffers are kept by size class
// (powers of two) up to a total, past which they are freed.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

namespace cohort {

class BufferPool {
 public:
  explicit BufferPool(size_t keep_bytes) : keep_bytes_(keep_bytes) {}
  ~BufferPool() {
    for (auto& [size, buffers] : free_) {
      for (void* b : buffers) std::free(b);
    }
  }
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // size_class is the capacity a request of n bytes gets.
  static size_t size_class(size_t n) {
    size_t c = 4096;
    while (c < n) c <<= 1;
    return c;
  }

  // take returns a buffer of at least n bytes (64-byte aligned); give it
  // back with give(buffer, n).
  void* take(size_t n) {
    const size_t c = size_class(n);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(c);
      if (it != free_.end() && !it->second.empty()) {
        void* b = it->second.back();
        it->second.pop_back();
        kept_ -= c;
        return b;
      }
    }
    void* b = nullptr;
    if (posix_memalign(&b, 64, c) != 0) return nullptr;
    return b;
  }

  void give(void* buffer, size_t n) {
    const size_t c = size_class(n);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (kept_ + c <= keep_bytes_) {
        free_[c].push_back(buffer);
        kept_ += c;
        return;
      }
    }
    std::free(buffer);
  }

 private:
  const size_t keep_bytes_;
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // guarded by mu_
  size_t kept_ = 0;                            // guarded by mu_
};

}  // namespace cohort
