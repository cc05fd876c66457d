#include "diagnostics/stall_inspector.h"

#include <algorithm>
#include <cstdio>

#include "cohort/store.h"
#include "common/logging.h"
#include "common/rank_list.h"
#include "diagnostics/group_trace.h"

namespace cohort {
namespace {

constexpr int64_t kSecondNs = 1000000000;
// Publishing more often than this would load the store for nothing: a
// warning comes after many seconds, and a rank stuck in an operation
// publishes at once anyway.
constexpr int64_t kPublishEveryNs = kSecondNs;
// Returned by compare_set for a key that does not exist (never stored).
const char kAbsent[] = "(absent)";

std::string seconds_text(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ns) / kSecondNs);
  return buf;
}

// with_global adds the global ranks when they differ from the group's.
std::string with_global(const GroupTrace& group, const std::vector<int>& ranks) {
  std::vector<int> global;
  bool same = true;
  for (int r : ranks) {
    global.push_back(group.global_ranks()[static_cast<size_t>(r)]);
    same &= global.back() == r;
  }
  return rank_list(ranks) + (same ? "" : " (global ranks " + rank_list(global) + ")");
}

// describe names a collective of `group`: "all_reduce #5 of group default
// (4 MiB float32)", from its ring entry while the ring has it.
std::string describe(const GroupTrace& group, uint64_t sequence) {
  auto entry = group.recorder().find(sequence, true);
  const std::string of = " #" + std::to_string(sequence) + " of group " + group.name();
  if (!entry) return "collective" + of;
  const std::string size = record_size_text(trace_record_of(*entry, 0));
  return entry->op + of + (size.empty() ? "" : " (" + size + ")");
}

}  // namespace

std::string progress_key(int rank) {
  return "stall/progress/" + std::to_string(rank);
}

StallInspector::StallInspector(double warn_s) : warn_ns_(static_cast<int64_t>(warn_s * kSecondNs)) {}

int64_t StallInspector::tick_interval_ns() const {
  return std::clamp<int64_t>(warn_ns_ / 4, kSecondNs / 100, kSecondNs);
}

std::vector<std::string> StallInspector::tick(GroupTrace& group, int64_t now_ns) {
  const Progress c = group.recorder().progress(true);
  const bool running = c.started > c.finished;
  const int64_t pending_ns = running ? now_ns - group.recorder().running_since_ns() : 0;
  const bool changed = c.started != published_started_ || c.completed != published_completed_;
  if (changed && (now_ns - published_at_ns_ >= kPublishEveryNs || pending_ns >= warn_ns_ / 2)) {
    publish(group, c.started, c.completed, now_ns, running);
  }
  std::vector<std::string> warnings;
  std::string w = check_collective(group, now_ns);
  if (!w.empty()) warnings.push_back(std::move(w));
  w = check_p2p(group, now_ns);
  if (!w.empty()) warnings.push_back(std::move(w));
  for (const std::string& text : warnings) COHORT_LOG(kWarning) << text;
  return warnings;
}

void StallInspector::publish(GroupTrace& group, uint64_t started, uint64_t completed, int64_t now_ns,
                             bool running) {
  if (!store_ok_ || !group.store()) return;
  try {
    group.store()->set(progress_key(group.rank()),
                       to_bytes(std::to_string(started) + " " + std::to_string(completed)));
    published_started_ = started;
    published_completed_ = completed;
    published_at_ns_ = now_ns;
  } catch (const std::exception& e) {
    store_failed(group, e, running);
  }
}

void StallInspector::store_failed(GroupTrace& group, const std::exception& e, bool warn) {
  store_ok_ = false;
  store_error_ = e.what();
  // With nothing pending, the likeliest cause is a job ending: the rank
  // hosting the store has left while this one tears down. Not worth a
  // warning then; a stall warning later says the store failed, and why.
  const LogLevel level = warn ? LogLevel::kWarning : LogLevel::kInfo;
  if (!log_enabled(level)) return;
  LogLine(level)
      << "stall inspector: the store of group " << group.name() << " failed (" << e.what()
      << "); this rank stops publishing its progress there, and its warnings will not name the ranks that "
         "are late";
}

std::string StallInspector::check_collective(GroupTrace& group, int64_t now_ns) {
  const Progress c = group.recorder().progress(true);
  if (c.started <= c.finished) return "";
  if (c.started != watched_sequence_) {
    watched_sequence_ = c.started;
    next_warning_ns_ = warn_ns_;
  }
  const int64_t pending_ns = now_ns - group.recorder().running_since_ns();
  if (pending_ns < next_warning_ns_) return "";
  next_warning_ns_ *= 2;
  return describe(group, c.started) + " has been pending for " + seconds_text(pending_ns) + " on rank " +
         std::to_string(group.rank()) + "; " + late_ranks(group, c.started);
}

std::string StallInspector::late_ranks(GroupTrace& group, uint64_t sequence) {
  if (!group.store()) return "the group has no store, so the ranks that have not joined it are unknown";
  if (!store_ok_) {
    return "the ranks that have not joined it are unknown (the group's store failed: " + store_error_ + ")";
  }
  const int size = group.size();
  std::vector<std::string> keys;
  for (int q = 0; q < size; ++q) keys.push_back(progress_key(q));
  std::vector<std::string> values(static_cast<size_t>(size));
  try {
    Store& store = *group.store();
    if (store.check(keys)) {
      auto got = store.multi_get(keys);
      for (int q = 0; q < size; ++q) values[q] = to_string(got[q]);
    } else {
      // Some rank never published; compare_set reads without waiting.
      for (int q = 0; q < size; ++q)
        values[q] = to_string(store.compare_set(keys[q], to_bytes(kAbsent), to_bytes(kAbsent)));
    }
  } catch (const std::exception& e) {
    store_failed(group, e, true);
    return "the ranks that have not joined it are unknown (the group's store failed: " + store_error_ + ")";
  }
  std::vector<int> late;
  std::string detail;
  for (int q = 0; q < size; ++q) {
    if (q == group.rank()) continue;  // it is pending here: this rank joined
    unsigned long long started = 0;
    if (values[q] != kAbsent) std::sscanf(values[q].c_str(), "%llu", &started);
    if (started >= sequence) continue;
    late.push_back(q);
    detail += (detail.empty() ? "" : ", ") + std::string("rank ") + std::to_string(q) + " last started " +
              (started ? "#" + std::to_string(started) : "nothing");
  }
  if (late.empty()) {
    return "every rank has joined it (as of their last published progress): it waits on the transport";
  }
  return "ranks " + with_global(group, late) + " have not joined it (" + detail + ")";
}

std::string StallInspector::check_p2p(GroupTrace& group, int64_t now_ns) {
  const Progress p = group.recorder().progress(false);
  if (p.started <= p.finished) {
    p2p_watching_ = false;
    return "";
  }
  if (!p2p_watching_ || p.finished != p2p_finished_seen_) {
    p2p_watching_ = true;
    p2p_finished_seen_ = p.finished;
    p2p_quiet_since_ns_ = now_ns;
    p2p_next_warning_ns_ = warn_ns_;
    return "";
  }
  const int64_t quiet_ns = now_ns - p2p_quiet_since_ns_;
  if (quiet_ns < p2p_next_warning_ns_) return "";
  p2p_next_warning_ns_ *= 2;
  std::string text = std::to_string(p.started - p.finished) + " point-to-point operation" +
                     (p.started - p.finished > 1 ? "s" : "") + " of group " + group.name() +
                     " in flight on rank " + std::to_string(group.rank()) + ", none finished for " +
                     seconds_text(quiet_ns);
  for (const TraceEntry& e : group.recorder().snapshot()) {
    if (e.collective || e.state != OpState::kStarted) continue;
    const std::string peer = e.shape.peer < 0 ? "any rank" : "ranks " + with_global(group, {e.shape.peer});
    text += "; the oldest is " + record_text(trace_record_of(e, 0)) + ", waiting for " + peer;
    break;
  }
  return text;
}

}  // namespace cohort
