// trace_dump.h: one rank's flight-recorder dump: the value, its JSON form
// (docs/flight_recorder.md), and the files, `rank_<global rank>.json` in
// COHORT_TRACE_DIR, that cohort-trace reads back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "diagnostics/flight_recorder.h"

namespace cohort {

// TraceRecord is one operation as dumped. Times are microseconds since the
// Unix epoch (each rank's own clock); 0 means "not yet".
struct TraceRecord {
  uint64_t id = 0;
  std::string op;  // "all_reduce", "send", ...
  bool collective = true;
  uint64_t sequence = 0;
  OpState state = OpState::kScheduled;
  uint64_t input_count = 0;
  uint64_t output_count = 0;
  std::string dtype;  // "float32"; empty when the operation has none
  int peer = -1;      // send/recv: the other group rank; rooted collectives: the root
  int tag = 0;
  int64_t enqueued_us = 0;
  int64_t started_us = 0;
  int64_t ended_us = 0;
  std::string error;
};

// GroupDump is one group as one rank saw it.
struct GroupDump {
  std::string name;
  int rank = 0;  // this rank's rank in the group
  int size = 0;
  std::vector<int> global_ranks;
  std::string backend;
  uint64_t capacity = 0;  // how many entries the ring keeps
  Progress collectives;
  Progress p2p;
  std::vector<TraceRecord> entries;  // oldest first
  // What this rank's straggler accounting knew (ArrivalAccounting::report;
  // docs/stragglers.md); null in dumps written without it.
  Json arrivals;
};

// RankDump is everything one process wrote.
struct RankDump {
  int global_rank = -1;
  int64_t pid = 0;
  std::string host;
  std::string reason;  // "SIGUSR1", or the failure that made it
  int64_t dumped_us = 0;
  std::vector<GroupDump> groups;
};

// trace_record_of converts a recorder entry; `unix_offset_ns` is the Unix
// time minus the steady clock (trace_clock_ns) at the time of the dump.
TraceRecord trace_record_of(const TraceEntry& entry, int64_t unix_offset_ns);

// record_size_text says how much an operation moves: "4 MiB float32" (the
// larger of its input and output, as nccl-tests counts); "" for a barrier.
std::string record_size_text(const TraceRecord& record);

// record_text names an operation for messages: "all_reduce #5 (4 MiB
// float32)", "recv from 1 tag 0 (p2p #3, 4 B int32)".
std::string record_text(const TraceRecord& record);

// unix_offset_ns returns the Unix time minus trace_clock_ns(), now.
int64_t unix_offset_ns();

// rank_dump_json writes a dump as a JSON document; parse_rank_dump reads
// one back, or says what is wrong with it (InvalidArgument).
std::string rank_dump_json(const RankDump& dump);
Result<RankDump> parse_rank_dump(const std::string& text);

// write_file_replacing writes `text` to `path` through a temporary file
// renamed into place: a reader sees the old file or the new one.
Status write_file_replacing(const std::string& path, const std::string& text);

// write_rank_dump writes `dump` to DIR/rank_<global rank>.json through a
// temporary file renamed into place, so that a reader never sees half a
// dump; DIR is created if it is missing.
Status write_rank_dump(const std::string& dir, const RankDump& dump);

// read_rank_dumps reads every rank_*.json in `dir`; files that cannot be
// read or parsed are named in `problems` and left out.
Result<std::vector<RankDump>> read_rank_dumps(const std::string& dir, std::vector<std::string>* problems);

}  // namespace cohort
