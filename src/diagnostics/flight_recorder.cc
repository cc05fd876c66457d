#include "diagnostics/flight_recorder.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>

#include "common/fast_clock.h"

namespace cohort {
namespace {

uint64_t total(const std::vector<Buffer>& list) {
  uint64_t n = 0;
  for (const Buffer& b : list) n += b.count;
  return n;
}

OpShape make_shape(uint64_t in, uint64_t out, DType dtype, int peer) {
  OpShape s;
  s.input_count = in;
  s.output_count = out;
  s.dtype = dtype;
  s.has_dtype = true;
  s.peer = peer;
  return s;
}

}  // namespace

const char* op_state_name(OpState state) {
  switch (state) {
    case OpState::kScheduled:
      return "scheduled";
    case OpState::kStarted:
      return "started";
    case OpState::kCompleted:
      return "completed";
    case OpState::kFailed:
      return "failed";
  }
  return "?";
}

OpShape shape_of(const Buffer& buffer, int root) {
  return make_shape(buffer.count, buffer.count, buffer.dtype, root);
}

OpShape shape_of(const std::vector<Buffer>& outputs, const Buffer& input, int root) {
  return make_shape(input.count, total(outputs), input.dtype, root);
}

OpShape shape_of(const Buffer& output, const std::vector<Buffer>& inputs, int root) {
  return make_shape(total(inputs), output.count, output.dtype, root);
}

OpShape shape_of(const std::vector<Buffer>& outputs, const std::vector<Buffer>& inputs) {
  const DType dtype = !inputs.empty() ? inputs[0].dtype : DType::kFloat32;
  OpShape s = make_shape(total(inputs), total(outputs), dtype, -1);
  s.has_dtype = !inputs.empty();
  return s;
}

OpShape p2p_shape(const Buffer& buffer, int peer, int tag) {
  OpShape s = make_shape(buffer.count, buffer.count, buffer.dtype, peer);
  s.tag = tag;
  return s;
}

int64_t trace_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(fast_now().time_since_epoch()).count();
}

FlightRecorder::FlightRecorder(size_t capacity) : capacity_(capacity), next_slot_(capacity ? 1 % capacity : 0) {
  slots_.reserve(capacity);
  times_.reserve(capacity);
  literal_names_.reserve(capacity);
}

void FlightRecorder::name_entry(TraceEntry* e, std::string_view op) {
  const size_t n = std::min(op.size(), sizeof e->op - 1);
  std::memcpy(e->op, op.data(), n);
  e->op[n] = '\0';
}

TraceEntry FlightRecorder::read_slot(size_t i, const CounterScale& scale) const {
  TraceEntry e = slots_[i];
  if (!literal_names_[i].empty()) name_entry(&e, literal_names_[i]);
  e.enqueued_ns = scale.steady_ns(times_[i].enqueued);
  e.started_ns = scale.steady_ns(times_[i].started);
  e.ended_ns = scale.steady_ns(times_[i].ended);
  // Readings from two cores may differ by a hair.
  if (e.started_ns) e.started_ns = std::max(e.started_ns, e.enqueued_ns);
  if (e.ended_ns) e.ended_ns = std::max(e.ended_ns, e.started_ns);
  return e;
}

void FlightRecorder::raise_to(std::atomic<uint64_t>& counter, uint64_t value) {
  // One writer at a time (see the members): no read-modify-write needed.
  if (counter.load(std::memory_order_relaxed) < value) counter.store(value, std::memory_order_relaxed);
}

TraceTicket FlightRecorder::record(std::string_view op, bool op_is_literal, const OpShape& shape,
                                   uint64_t sequence, bool collective, OpState state, uint64_t now) {
  raise_to(counters(collective).enqueued, sequence);
  if (capacity_ == 0) return TraceTicket{0, sequence, collective, 0};
  const uint64_t id = next_id_++;
  const size_t slot = next_slot_;
  next_slot_ = slot + 1 == capacity_ ? 0 : slot + 1;
  if (slot >= slots_.size()) {  // the first time round: within the reserved room
    slots_.resize(slot + 1);
    times_.resize(slot + 1);
    literal_names_.resize(slot + 1);
  }
  TraceEntry& e = slots_[slot];
  e.id = id;
  e.sequence = sequence;
  e.collective = collective;
  e.state = state;
  if (op_is_literal) {
    literal_names_[slot] = op;  // copied into the entry when it is read
  } else {
    literal_names_[slot] = {};
    name_entry(&e, op);
  }
  e.shape = shape;
  times_[slot] = Times{now, state == OpState::kStarted ? now : 0, 0};
  if (!e.error.empty()) e.error.clear();  // keeps its capacity: no allocation
  return TraceTicket{id, sequence, collective, static_cast<uint32_t>(slot)};
}

TraceTicket FlightRecorder::scheduled(std::string_view op, const OpShape& shape, uint64_t sequence,
                                      bool collective) {
  const uint64_t now = read_counter();
  // The name is the description's first word: "send" of "send to 3 tag 0".
  op = op.substr(0, op.find(' '));
  std::lock_guard<SpinLock> lock(mu_);
  return record(op, false, shape, sequence, collective, OpState::kScheduled, now);
}

TraceTicket FlightRecorder::began(std::string_view op, const OpShape& shape, uint64_t sequence,
                                  uint64_t now) {
  running_since_.store(now, std::memory_order_relaxed);
  raise_to(collectives_.started, sequence);
  std::lock_guard<SpinLock> lock(mu_);
  return record(op, true, shape, sequence, true, OpState::kStarted, now);
}

TraceEntry* FlightRecorder::slot_of(const TraceTicket& ticket) {
  if (ticket.id == 0) return nullptr;
  TraceEntry& e = slots_[ticket.slot];
  return e.id == ticket.id ? &e : nullptr;
}

void FlightRecorder::started(const TraceTicket& ticket) {
  const uint64_t now = read_counter();
  if (ticket.collective) running_since_.store(now, std::memory_order_relaxed);
  raise_to(counters(ticket.collective).started, ticket.sequence);
  if (ticket.id == 0) return;
  std::lock_guard<SpinLock> lock(mu_);
  if (TraceEntry* e = slot_of(ticket)) {
    e->state = OpState::kStarted;
    times_[ticket.slot].started = now;
  }
}

void FlightRecorder::finished(const TraceTicket& ticket, const std::string* error) {
  Counters& c = counters(ticket.collective);
  raise_to(error ? c.failed : c.completed, ticket.sequence);
  // Release: a reader that sees this count also sees the counters above.
  c.finished.store(c.finished.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  if (ticket.id == 0) return;
  const uint64_t now = read_counter();  // only the ring keeps it
  std::lock_guard<SpinLock> lock(mu_);
  if (TraceEntry* e = slot_of(ticket)) {
    e->state = error ? OpState::kFailed : OpState::kCompleted;
    Times& t = times_[ticket.slot];
    if (t.started == 0) t.started = now;  // failed before it could start
    t.ended = now;
    if (error) e->error = *error;
  }
}

int64_t FlightRecorder::running_since_ns() const {
  const uint64_t reading = running_since_.load(std::memory_order_relaxed);
  std::lock_guard<SpinLock> lock(mu_);
  if (reading != since_converted_reading_) {
    since_converted_ns_ = CounterScale::now().steady_ns(reading);
    since_converted_reading_ = reading;
  }
  return since_converted_ns_;
}

Progress FlightRecorder::progress(bool collective) const {
  const Counters& c = collective ? collectives_ : p2p_;
  Progress p;
  // finished first: a reader then never sees more finished than started.
  p.finished = c.finished.load(std::memory_order_acquire);
  p.completed = c.completed.load(std::memory_order_relaxed);
  p.failed = c.failed.load(std::memory_order_relaxed);
  p.started = c.started.load(std::memory_order_relaxed);
  p.enqueued = c.enqueued.load(std::memory_order_relaxed);
  return p;
}

std::vector<TraceEntry> FlightRecorder::snapshot() const {
  std::vector<TraceEntry> out;
  {
    const CounterScale scale = CounterScale::now();
    std::lock_guard<SpinLock> lock(mu_);
    out.reserve(slots_.size());
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].id != 0) out.push_back(read_slot(i, scale));
    }
  }
  std::sort(out.begin(), out.end(), [](const TraceEntry& a, const TraceEntry& b) { return a.id < b.id; });
  return out;
}

std::vector<TraceEntry> FlightRecorder::newest(uint64_t after_id, size_t max, uint64_t* last_id) const {
  std::vector<TraceEntry> out;
  const CounterScale scale = CounterScale::now();
  std::lock_guard<SpinLock> lock(mu_);
  const uint64_t newest_id = next_id_ - 1;
  if (last_id) *last_id = newest_id;
  if (capacity_ == 0 || newest_id <= after_id) return out;
  // The ring holds ids (newest - capacity, newest]; slot = id % capacity.
  uint64_t first = std::max<uint64_t>(after_id + 1, newest_id >= capacity_ ? newest_id - capacity_ + 1 : 1);
  if (newest_id - first + 1 > max) first = newest_id - max + 1;
  out.reserve(static_cast<size_t>(newest_id - first + 1));
  for (uint64_t id = first; id <= newest_id; ++id) {
    const size_t i = static_cast<size_t>(id % capacity_);
    if (i < slots_.size() && slots_[i].id == id) out.push_back(read_slot(i, scale));
  }
  return out;
}

std::optional<TraceEntry> FlightRecorder::find(uint64_t sequence, bool collective) const {
  const CounterScale scale = CounterScale::now();
  std::lock_guard<SpinLock> lock(mu_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    const TraceEntry& e = slots_[i];
    if (e.id != 0 && e.sequence == sequence && e.collective == collective) return read_slot(i, scale);
  }
  return std::nullopt;
}

}  // namespace cohort
