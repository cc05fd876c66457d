#include "common/relayed_cause.h"

#include "common/byte_codec.h"
#include "common/point_of_view.h"

namespace cohort {
namespace {

// A cause is a sentence or a few; anything longer than this is not one.
constexpr size_t kMaxTextBytes = 1 << 20;
constexpr uint32_t kMaxWaits = 1 << 16;

// Only what a failure can be: a timeout, a desync, or else a network error
// (the peer failed; an argument error there is not one here).
StatusCode relayable(StatusCode code) {
  return code == StatusCode::kTimeout || code == StatusCode::kDesync ? code : StatusCode::kNetworkError;
}

std::string waited_for(const RelayedCause::Wait& w) {
  return "; rank " + std::to_string(w.rank) + " was itself " + w.owed;
}

}  // namespace

RelayedCause cause_to_relay(const Status& status, int rank) {
  if (status.cause()) return *status.cause();
  RelayedCause cause;
  cause.code = relayable(status.code());
  cause.origin = rank;
  cause.text = status.message();
  return cause;
}

std::string worded_for(const RelayedCause& cause, int reader) {
  std::string said = as_said_by(cause.text, cause.origin);
  // A text that was already a relayed one's words (made into a new error
  // on its way) names its reporter.
  if (said.find("(reported by rank ") == std::string::npos) {
    said += " (reported by rank " + std::to_string(cause.origin) + ")";
  }
  for (const RelayedCause::Wait& w : cause.waits) said += waited_for(w);
  return as_read_by(said, reader);
}

Status relayed_failure(RelayedCause cause, int reader, const std::string& owed) {
  cause.code = relayable(cause.code);
  std::string text = worded_for(cause, reader);
  if (!owed.empty()) {
    cause.waits.push_back(RelayedCause::Wait{reader, owed});
    text += waited_for(cause.waits.back());  // the reader's own, in its own words already
  }
  const StatusCode code = cause.code;
  return Status(code, std::move(text)).with_cause(std::make_shared<const RelayedCause>(std::move(cause)));
}

std::vector<uint8_t> encode_cause(const RelayedCause& cause) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.u8(static_cast<uint8_t>(cause.code));
  w.u32(static_cast<uint32_t>(cause.origin));
  w.str(cause.text);
  w.u32(static_cast<uint32_t>(cause.waits.size()));
  for (const RelayedCause::Wait& wait : cause.waits) {
    w.u32(static_cast<uint32_t>(wait.rank));
    w.str(wait.owed);
  }
  return out;
}

bool decode_cause(const uint8_t* data, size_t size, RelayedCause* out) {
  ByteReader r(data, size);
  uint8_t code;
  uint32_t origin, waits;
  if (!r.u8(&code) || !r.u32(&origin) || !r.str(&out->text, kMaxTextBytes) || !r.u32(&waits) ||
      waits > kMaxWaits) {
    return false;
  }
  out->code = relayable(static_cast<StatusCode>(code));
  out->origin = static_cast<int>(origin);
  out->waits.resize(waits);
  for (RelayedCause::Wait& w : out->waits) {
    uint32_t rank;
    if (!r.u32(&rank) || !r.str(&w.owed, kMaxTextBytes)) return false;
    w.rank = static_cast<int>(rank);
  }
  return r.remaining() == 0;
}

}  // namespace cohort
