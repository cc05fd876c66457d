#include "diagnostics/arrival_accounting.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>

#include "cohort/errors.h"
#include "cohort/store.h"
#include "common/config_registry.h"
#include "common/logging.h"
#include "diagnostics/group_trace.h"

namespace cohort {
namespace {

std::string this_host() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

Bytes bytes_of(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

// A rank's samples as its record lists them: sequence -> [us, op, bytes].
struct RankSamples {
  std::map<uint64_t, std::array<int64_t, 3>> by_sequence;
};

// The windows travel as one string, "seq us op bytes;..." (a JSON array
// of arrays cost a tick ten times as much to write and read).
RankSamples samples_of(const Json& record) {
  RankSamples out;
  const char* p = record["w"].as_string().c_str();
  while (*p) {
    char* end = nullptr;
    int64_t v[4];
    int n = 0;
    for (; n < 4; ++n, p = end) {
      v[n] = std::strtoll(p, &end, 10);
      if (end == p) break;
    }
    if (n == 4) out.by_sequence[static_cast<uint64_t>(v[0])] = {v[1], v[2], v[3]};
    while (*p && *p != ';') ++p;
    if (*p == ';') ++p;
  }
  return out;
}

// keep_summary_file replaces DIR/<group>.json (the launcher's line at the
// end of a job reads it); `dir` is COHORT_STRAGGLER_DIR, read when the
// group was made: the monitor thread may outlive the config's statics in a
// process that exits without destroying its groups.
void keep_summary_file(const std::string& dir, const std::string& group, const std::string& text) {
  if (dir.empty()) return;
  std::string name;
  for (char c : group) name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_';
  Status st = write_file_replacing(dir + "/" + name + ".json", text);
  if (!st.ok()) {
    COHORT_LOG(kInfo) << "straggler accounting: " << st.message();
  }
}

}  // namespace

double straggler_interval_s() {
  return config_float(knobs::kStragglerIntervalS);
}

std::string stragglers_groups_key() {
  return "cohort/stragglers/groups";
}
std::string stragglers_rank_key(const std::string& group, int rank) {
  return "cohort/stragglers/" + group + "/rank/" + std::to_string(rank);
}
std::string stragglers_summary_key(const std::string& group) {
  return "cohort/stragglers/" + group + "/summary";
}

ArrivalAccounting::ArrivalAccounting(int rank, int size)
    : rank_(rank),
      size_(size),
      host_(this_host()),
      summary_dir_(config_string(knobs::kStragglerDir)),
      stats_(rank == 0 ? size : 0) {}

void ArrivalAccounting::keep(const Sample& s) {
  for (size_t level = 0; level < 3; ++level) {
    if (s.sequence % kStrides[level] != 0) continue;
    windows_[level][(s.sequence / kStrides[level]) % kWindow] = s;
  }
}

void ArrivalAccounting::take_completed(GroupTrace& group) {
  uint64_t newest_id = 0;
  // At most the ring's newest 512 entries a look (a bounded hold of its
  // lock): a group faster than that is sampled anyway.
  const std::vector<TraceEntry> entries = group.recorder().newest(last_id_, 4 * kWindow, &newest_id);
  int64_t busy = 0;
  uint64_t kept = 0;
  bool all_finished = true;  // so far: last_id_ moves up to the first pending entry
  for (const TraceEntry& e : entries) {
    const bool finished = e.state == OpState::kCompleted || e.state == OpState::kFailed;
    if (e.collective) current_op_ = e.op;
    if (!finished) all_finished = false;
    if (all_finished) last_id_ = e.id;
    if (!finished || !e.collective || e.state != OpState::kCompleted || e.sequence <= last_sequence_)
      continue;
    const int code = leave_together_index(e.op);
    if (code < 0) continue;
    last_sequence_ = e.sequence;
    const uint64_t count = std::max(e.shape.input_count, e.shape.output_count);
    Sample s{e.sequence, e.ended_ns - e.started_ns, static_cast<uint8_t>(code),
             e.shape.has_dtype ? count * dtype_size(e.shape.dtype) : 0};
    keep(s);
    busy += s.duration_ns;
    ++kept;
  }
  if (entries.empty()) last_id_ = std::max(last_id_, newest_id);
  std::lock_guard<std::mutex> lock(mu_);
  busy_ns_ += busy;
  collectives_ += kept;
}

Json ArrivalAccounting::record(GroupTrace& group, int64_t unix_us) const {
  const Progress p = group.recorder().progress(true);
  Json r = Json::object();
  r.set("rank", rank_);
  r.set("host", host_);
  r.set("pid", static_cast<int64_t>(::getpid()));
  r.set("t_us", unix_us);
  r.set("op", current_op_);
  r.set("started", p.started);
  r.set("completed", p.completed);
  r.set("running", p.started > p.completed && p.started > p.failed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    r.set("steps_per_s", steps_per_s_);
    r.set("busy_s", static_cast<double>(busy_ns_) / 1e9);
    r.set("collectives", collectives_);
  }
  std::map<uint64_t, const Sample*> merged;  // the windows overlap: each sequence once
  for (const auto& window : windows_) {
    for (const Sample& s : window) {
      if (s.sequence) merged[s.sequence] = &s;
    }
  }
  std::string w;  // "seq us op bytes;...": see samples_of
  w.reserve(merged.size() * 24);
  for (const auto& [seq, s] : merged) {
    w += std::to_string(seq) + ' ' + std::to_string(s->duration_ns / 1000) + ' ' +
         std::to_string(static_cast<int>(s->op)) + ' ' + std::to_string(s->bytes) + ';';
  }
  r.set("w", std::move(w));
  return r;
}

void ArrivalAccounting::join(GroupTrace& group, Store& store) {
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back(stragglers_rank_key(group.name(), r));
  if (!store.check(keys)) return;  // a rank has not published yet
  const std::vector<Bytes> values = store.multi_get(keys);
  std::vector<RankSamples> ranks;
  hosts_.assign(static_cast<size_t>(size_), "");
  for (int r = 0; r < size_; ++r) {
    auto doc = Json::parse(to_string(values[static_cast<size_t>(r)]));
    if (!doc.ok()) return;
    hosts_[static_cast<size_t>(r)] = doc.value()["host"].as_string();
    ranks.push_back(samples_of(doc.value()));
  }
  uint64_t through = joined_through_;
  std::vector<int64_t> durations(static_cast<size_t>(size_));
  for (const auto& [seq, first] : ranks[0].by_sequence) {
    if (seq <= joined_through_) continue;
    bool everyone = true;
    for (int r = 0; r < size_ && everyone; ++r) {
      auto it = ranks[static_cast<size_t>(r)].by_sequence.find(seq);
      everyone = it != ranks[static_cast<size_t>(r)].by_sequence.end() && it->second[1] == first[1];
      if (everyone) durations[static_cast<size_t>(r)] = it->second[0] * 1000;
    }
    if (!everyone) continue;
    stats_.add(durations, collective_name(leave_together_family(static_cast<int>(first[1] % kLeaveTogether))),
               static_cast<uint64_t>(first[2]));
    through = seq;
  }
  joined_through_ = through;
  Json summary = stats_.to_json(hosts_);
  summary.set("group", group.name());
  summary.set("size", size_);
  summary.set("through", joined_through_);
  summary.set("updated_us", (trace_clock_ns() + unix_offset_ns()) / 1000);
  const std::string text = summary.dump(-1);
  store.set(stragglers_summary_key(group.name()), bytes_of(text));
  keep_summary_file(summary_dir_, group.name(), text);
  std::lock_guard<std::mutex> lock(mu_);
  summary_ = std::move(summary);
}

bool ArrivalAccounting::usable(GroupTrace& group) {
  if (!store_ok_) return false;
  if (!store_) {
    if (!group.store()) return store_ok_ = false;
    store_ = group.store()->root();
    if (!store_) store_ = group.store();
  }
  return true;
}

void ArrivalAccounting::store_failed(GroupTrace& group, const std::exception& e) {
  store_ok_ = false;
  store_.reset();
  // Usual at the end of a job: the store leaves with the rank that serves it.
  COHORT_LOG(kInfo) << "straggler accounting of group " << group.name()
                    << " stops using the store: " << e.what();
}

void ArrivalAccounting::tick(GroupTrace& group, int64_t now_ns) {
  take_completed(group);
  const uint64_t finished = group.recorder().progress(true).finished;
  if (last_tick_ns_ > 0 && now_ns > last_tick_ns_) {
    std::lock_guard<std::mutex> lock(mu_);
    steps_per_s_ = static_cast<double>(finished - finished_at_last_tick_) * 1e9 /
                   static_cast<double>(now_ns - last_tick_ns_);
  }
  finished_at_last_tick_ = finished;
  last_tick_ns_ = now_ns;
  if (!usable(group)) return;
  try {
    const int64_t unix_us = (now_ns + unix_offset_ns()) / 1000;
    store_->set(stragglers_rank_key(group.name(), rank_), bytes_of(record(group, unix_us).dump(-1)));
    if (rank_ != 0) {
      const std::string key = stragglers_summary_key(group.name());
      if (!store_->check({key})) return;
      auto doc = Json::parse(to_string(store_->get(key)));
      if (!doc.ok()) return;
      std::lock_guard<std::mutex> lock(mu_);
      summary_ = std::move(doc.value());
      return;
    }
    if (!listed_) {
      store_->append(stragglers_groups_key(), bytes_of(group.name() + "\n"));
      listed_ = true;
    }
    if (size_ > 1) join(group, *store_);
  } catch (const std::exception& e) {
    store_failed(group, e);
  }
}

Json ArrivalAccounting::report() const {
  Json r = Json::object();
  r.set("rank", rank_);
  r.set("host", host_);
  std::lock_guard<std::mutex> lock(mu_);
  r.set("collectives", collectives_);
  r.set("busy_s", static_cast<double>(busy_ns_) / 1e9);
  r.set("steps_per_s", steps_per_s_);
  r.set("summary", summary_);
  return r;
}

}  // namespace cohort
