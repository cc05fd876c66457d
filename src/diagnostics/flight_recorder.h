// flight_recorder.h: the last N operations of one group, kept for the dumps
// that tell why a job hangs or failed (docs/flight_recorder.md).
//
// Each operation a ProcessGroup numbers gets an entry when it is scheduled;
// the entry then moves to started, and to completed or failed. Entries live
// in a ring allocated once (COHORT_TRACE_BUFFER_ENTRIES of them; 0 keeps
// none) with fixed-size fields, so that recording a small collective that
// runs on the caller's thread allocates nothing and costs one uncontended
// spin lock (common/spin_lock.h) per state change and two bare reads of the
// time-stamp counter, converted to nanoseconds only when an entry is read
// (common/fast_clock.h). A failure's text is the one
// field that allocates, on the failure path only.
//
// The progress counters (last number enqueued, started, completed) are kept
// even without a ring, in atomics: the stall inspector and the dumps read
// them from other threads without the lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/types.h"
#include "common/fast_clock.h"
#include "common/spin_lock.h"

namespace cohort {

enum class OpState : uint8_t { kScheduled, kStarted, kCompleted, kFailed };

// op_state_name returns "scheduled", "started", "completed" or "failed".
const char* op_state_name(OpState state);

// OpShape is what the recorder keeps of an operation's arguments.
struct OpShape {
  uint64_t input_count = 0;   // elements, all inputs together
  uint64_t output_count = 0;  // elements, all outputs together
  DType dtype = DType::kFloat32;
  bool has_dtype = false;  // a barrier moves no elements
  // send/recv: the other group rank (-1: any source); rooted collectives:
  // the root; -1 otherwise.
  int peer = -1;
  int tag = 0;  // send/recv
};

// The shapes of the calls: one buffer (all_reduce, broadcast, reduce), a
// list out and one in (all_gather, gather), one out and a list in (scatter,
// reduce_scatter), lists both ways (all_to_all), and send/recv.
OpShape shape_of(const Buffer& buffer, int root = -1);
OpShape shape_of(const std::vector<Buffer>& outputs, const Buffer& input, int root = -1);
OpShape shape_of(const Buffer& output, const std::vector<Buffer>& inputs, int root = -1);
OpShape shape_of(const std::vector<Buffer>& outputs, const std::vector<Buffer>& inputs);
OpShape p2p_shape(const Buffer& buffer, int peer, int tag);

// TraceTicket names one recorded operation to the calls that follow it.
struct TraceTicket {
  uint64_t id = 0;  // position in the ring's history; 0: not in the ring
  uint64_t sequence = 0;
  bool collective = true;
  uint32_t slot = 0;  // where the entry went (id % capacity, kept to spare a division)
};

// TraceEntry is one operation as recorded. Times are on the steady clock
// (ns); 0 means "not yet".
struct TraceEntry {
  uint64_t id = 0;  // 1, 2, ... in the order the recorder saw them; 0: unused slot
  uint64_t sequence = 0;
  bool collective = true;
  OpState state = OpState::kScheduled;
  char op[24] = {};  // "all_reduce", "send"; cut to fit
  OpShape shape;
  int64_t enqueued_ns = 0;
  int64_t started_ns = 0;
  int64_t ended_ns = 0;
  std::string error;  // why it failed
};

// Progress is one kind's counters (collectives, or point-to-point).
struct Progress {
  uint64_t enqueued = 0;   // the last number given out
  uint64_t started = 0;    // the last number started
  uint64_t completed = 0;  // the highest number that completed without error
  uint64_t failed = 0;     // the highest number that failed; 0: none
  uint64_t finished = 0;   // how many completed or failed
};

// trace_clock_ns reads the steady clock the recorder's times are on.
int64_t trace_clock_ns();

class FlightRecorder {
 public:
  explicit FlightRecorder(size_t capacity);
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  size_t capacity() const { return capacity_; }

  // scheduled records an operation that was given `sequence` and queued;
  // its name is the first word of `op` ("send" of "send to 3 tag 0").
  TraceTicket scheduled(std::string_view op, const OpShape& shape, uint64_t sequence, bool collective);
  // began records a collective that starts at once (on the caller's
  // thread), at `now` (a read_counter() reading); `op` is the collective's
  // name, one word, in storage that lives as long as the recorder (a
  // string literal): it is kept by address.
  TraceTicket began(std::string_view op, const OpShape& shape, uint64_t sequence,
                    uint64_t now = read_counter());
  // started and finished are called by the thread driving the operation;
  // `error` is null on success.
  void started(const TraceTicket& ticket);
  void finished(const TraceTicket& ticket, const std::string* error);

  Progress progress(bool collective) const;
  // running_since_ns is when the last started collective started; the
  // same value on every call until another one starts.
  int64_t running_since_ns() const;

  // snapshot copies the ring, oldest first (entries still in use only).
  std::vector<TraceEntry> snapshot() const;
  // newest copies the entries recorded after entry `after_id` that the
  // ring still holds, at most the `max` newest, oldest first; `last_id`
  // (if given) gets the newest id recorded so far.
  std::vector<TraceEntry> newest(uint64_t after_id, size_t max, uint64_t* last_id = nullptr) const;
  // find returns the entry of an operation while the ring still holds it.
  std::optional<TraceEntry> find(uint64_t sequence, bool collective) const;

 private:
  struct Counters {
    std::atomic<uint64_t> enqueued{0};
    std::atomic<uint64_t> started{0};
    std::atomic<uint64_t> completed{0};
    std::atomic<uint64_t> failed{0};
    std::atomic<uint64_t> finished{0};
  };
  // Times are kept as read_counter() readings (fast_clock.h) and
  // converted when read.
  struct Times {
    uint64_t enqueued = 0, started = 0, ended = 0;  // 0: not yet
  };
  // record fills the next slot, named `op` (one word); mu_ held. A name
  // that is a string literal (`op_is_literal`: began's collective names)
  // is kept by address and copied into the entry only when it is read.
  TraceTicket record(std::string_view op, bool op_is_literal, const OpShape& shape, uint64_t sequence,
                     bool collective, OpState state, uint64_t now);
  static void name_entry(TraceEntry* e, std::string_view op);
  // read_slot copies slot `i` with its name and times filled in; mu_ held.
  TraceEntry read_slot(size_t i, const CounterScale& scale) const;
  // slot_of returns the slot of `ticket` while it still holds that entry
  // (a long-pending operation may be overwritten by newer ones); mu_ held.
  TraceEntry* slot_of(const TraceTicket& ticket);
  Counters& counters(bool collective) { return collective ? collectives_ : p2p_; }
  static void raise_to(std::atomic<uint64_t>& counter, uint64_t value);

  mutable SpinLock mu_;
  // The ring's slots are made as the ids first reach them (slot = id %
  // capacity_: 1, 2, ..., then 0), in room reserved at once: a group made
  // and left after a few calls (every group of a 128-rank job's start)
  // writes a few entries, not 2000 (about 340 KiB a group, zeroed page by
  // page when the ring was made whole).
  size_t capacity_ = 0;
  std::vector<TraceEntry> slots_;  // guarded by mu_; times in times_
  std::vector<Times> times_;       // per slot; guarded by mu_
  // Per slot, the name given as a literal (empty: the entry's own op
  // holds it); guarded by mu_.
  std::vector<std::string_view> literal_names_;
  uint64_t next_id_ = 1;  // guarded by mu_
  size_t next_slot_ = 1;  // next_id_ % capacity; guarded by mu_
  // Written by one thread at a time (the one driving the group, or the
  // caller under mu_); read by anyone.
  Counters collectives_;
  Counters p2p_;
  std::atomic<uint64_t> running_since_{0};  // a read_counter() reading
  // running_since_ns()'s last conversion: converted again, a reading may
  // come out a few nanoseconds apart (fast_clock.h); guarded by mu_.
  mutable uint64_t since_converted_reading_ = 0;
  mutable int64_t since_converted_ns_ = 0;
};

}  // namespace cohort
