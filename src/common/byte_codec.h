// byte_codec.h: little-endian encoding of integers and length-prefixed
// strings, for the store's wire protocol and FileStore's records.
//
// ByteReader never reads past its end: every read reports failure instead,
// so a truncated or hostile buffer cannot make it touch memory it was not
// given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace cohort {

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>* out) : out_(out) {}
  void u8(uint8_t v) { out_->push_back(v); }
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void i64(int64_t v) { put(static_cast<uint64_t>(v), 8); }
  void raw(const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    out_->insert(out_->end(), b, b + n);
  }
  // str writes a u32 length, then the bytes.
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void bytes(const std::vector<uint8_t>& b) {
    u32(static_cast<uint32_t>(b.size()));
    raw(b.data(), b.size());
  }

 private:
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_->push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t>* out_;
};

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  const uint8_t* position() const { return p_; }

  bool u8(uint8_t* v) { return get(v, 1); }
  bool u16(uint16_t* v) { return get(v, 2); }
  bool u32(uint32_t* v) { return get(v, 4); }
  bool u64(uint64_t* v) { return get(v, 8); }
  bool i64(int64_t* v) {
    uint64_t u;
    if (!get(&u, 8)) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }
  bool raw(void* out, size_t n) {
    if (remaining() < n) return false;
    std::memcpy(out, p_, n);
    p_ += n;
    return true;
  }
  // str reads a u32 length and that many bytes; fails when the length
  // exceeds `max` or what is left.
  bool str(std::string* s, size_t max) {
    uint32_t n;
    if (!u32(&n) || n > max || n > remaining()) return false;
    s->assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }
  bool bytes(std::vector<uint8_t>* b, size_t max) {
    uint32_t n;
    if (!u32(&n) || n > max || n > remaining()) return false;
    b->assign(p_, p_ + n);
    p_ += n;
    return true;
  }

 private:
  template <class T>
  bool get(T* v, int n) {
    if (remaining() < static_cast<size_t>(n)) return false;
    uint64_t x = 0;
    for (int i = 0; i < n; ++i) x |= static_cast<uint64_t>(p_[i]) << (8 * i);
    *v = static_cast<T>(x);
    p_ += n;
    return true;
  }
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace cohort
