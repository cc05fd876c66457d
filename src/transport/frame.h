// frame.h: how a message travels on a link: a 24-byte header (magic, kind,
// tag, length), then the payload. The same bytes on every kind of link.
#pragma once

#include <cstdint>

namespace cohort {

constexpr uint32_t kFrameMagic = 0x31544843;  // "CHT1"

struct FrameHeader {
  uint32_t magic;
  uint32_t kind;  // a MessageKind
  uint64_t tag;
  uint64_t bytes;  // of the payload
};
static_assert(sizeof(FrameHeader) == 24, "the header is sent as it is laid out");

}  // namespace cohort
