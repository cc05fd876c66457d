// relayed_cause.h: why a group failed, as it travels from the rank that
// saw it first to the others.
//
// A rank that fails tells its peers why (transport/failure_relay.cc); they
// fail in turn and tell theirs. The cause travels as fields: the rank that
// saw it, its text in that rank's own words ("this rank" is that rank),
// and each rank it passed through that was itself waiting for someone.
// Every rank words the fields once, for itself, when it fails with them
// (worded_for), and relays the fields, not its words: no rank rewords
// another's rewording.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace cohort {

struct RelayedCause {
  StatusCode code = StatusCode::kNetworkError;
  int origin = -1;   // the rank that saw the cause first
  std::string text;  // in the origin's words
  // A rank the cause passed through, and what that rank was itself waiting
  // for when it came ("still waiting to receive from ranks [1]"): the
  // chain from the rank that waits to the one at its end.
  struct Wait {
    int rank = -1;
    std::string owed;
  };
  std::vector<Wait> waits;
};

// cause_to_relay is what `rank`, failing with `status`, tells its peers:
// the cause `status` carries when another rank relayed it, else a new one
// that this rank saw first.
RelayedCause cause_to_relay(const Status& status, int rank);

// relayed_failure is the Status `reader` fails with on reading `cause`:
// the cause worded for it, then (when `owed` is not empty) what the reader
// was itself waiting for, which also joins the fields it relays on.
Status relayed_failure(RelayedCause cause, int reader, const std::string& owed);

// worded_for is `cause` in `reader`'s words: the origin's text with "this
// rank" made the origin's number and the reader's number made "this rank
// (N)", "(reported by rank O)", then each wait.
std::string worded_for(const RelayedCause& cause, int reader);

// encode_cause and decode_cause are a failure frame's payload; decode
// returns false for bytes that are not one.
std::vector<uint8_t> encode_cause(const RelayedCause& cause);
bool decode_cause(const uint8_t* data, size_t size, RelayedCause* out);

}  // namespace cohort
