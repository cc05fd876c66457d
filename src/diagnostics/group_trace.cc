#include "diagnostics/group_trace.h"

#include "cohort/errors.h"
#include "common/config_registry.h"
#include "common/logging.h"
#include "diagnostics/group_monitor.h"

namespace cohort {

size_t trace_buffer_entries() {
  const int64_t n = config_int(knobs::kTraceBufferEntries);
  if (n < 0 || n > (1 << 24)) {
    throw InvalidArgument(std::string(knobs::kTraceBufferEntries.name) + " is " + std::to_string(n) +
                          "; it must be between 0 (no flight recorder) and 16777216");
  }
  return static_cast<size_t>(n);
}

GroupTrace::GroupTrace(std::string name, int rank, std::vector<int> global_ranks, std::string backend,
                       std::shared_ptr<Store> store, size_t capacity)
    : name_(std::move(name)),
      rank_(rank),
      global_ranks_(std::move(global_ranks)),
      backend_(std::move(backend)),
      store_(std::move(store)),
      recorder_(capacity),
      arrivals_(rank, static_cast<int>(global_ranks_.size())) {}

void GroupTrace::finish_failed(const TraceTicket& ticket, const std::exception_ptr& error) {
  std::string text;
  bool worth_a_dump = false;  // the failures that mean a peer is gone, late or out of step
  try {
    std::rethrow_exception(error);
  } catch (const TimeoutError& e) {
    text = e.what();
    worth_a_dump = true;
  } catch (const NetworkError& e) {
    text = e.what();
    worth_a_dump = true;
  } catch (const DesyncError& e) {
    text = e.what();
    worth_a_dump = true;
  } catch (const std::exception& e) {
    text = e.what();
  } catch (...) {
    text = "an exception that is not a std::exception";
  }
  recorder_.finished(ticket, &text);
  if (worth_a_dump && !dumped_on_failure_.exchange(true)) dump_traces("group " + name_ + " failed: " + text);
}

GroupDump GroupTrace::dump(int64_t unix_offset) const {
  GroupDump g;
  g.name = name_;
  g.rank = rank_;
  g.size = size();
  g.global_ranks = global_ranks_;
  g.backend = backend_;
  g.capacity = recorder_.capacity();
  g.collectives = recorder_.progress(true);
  g.p2p = recorder_.progress(false);
  for (const TraceEntry& e : recorder_.snapshot()) g.entries.push_back(trace_record_of(e, unix_offset));
  g.arrivals = arrivals_.report();
  return g;
}

}  // namespace cohort
