#include "algorithms/schedule_sim.h"

#include <algorithm>
#include <queue>
#include <unordered_map>

#include "algorithms/selection.h"

namespace cohort {
namespace {

// A message's identity for matching.
struct Key {
  int src, dst;
  uint32_t kind;
  uint64_t tag;
  bool operator==(const Key& o) const {
    return src == o.src && dst == o.dst && kind == o.kind && tag == o.tag;
  }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = k.tag * 0x9E3779B97F4A7C15ull;
    h ^= (static_cast<uint64_t>(static_cast<uint32_t>(k.src)) << 32 | static_cast<uint32_t>(k.dst)) +
         0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
    return static_cast<size_t>(h ^ k.kind);
  }
};

// What is known of one key: messages in (arrival times, sizes) that no
// receive took yet, or receives posted (index, time) that no message met.
struct Meeting {
  std::vector<std::pair<double, size_t>> arrived;
  std::vector<std::pair<uint32_t, double>> waiting;
};

enum class EventKind : uint8_t { kStartBatch, kDepart, kArrive };

struct Event {
  double t;
  uint64_t order;  // ties in posting order
  EventKind kind;
  int rank;
  uint32_t index;  // kDepart, kArrive: the sender's send
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : order > o.order; }
};

struct RankState {
  size_t batch = 0;
  uint32_t pending = 0;
  double batch_end = 0;
  double cpu_free = 0;
  double finished = -1;
};

class Simulation {
 public:
  Simulation(const std::vector<RankSchedule>& s, const std::vector<int>& host_of, const CostModel& m)
      : s_(s),
        host_of_(host_of),
        m_(m),
        ranks_(s.size()),
        egress_(s.size(), 0),
        ingress_(s.size(), 0),
        out_bytes_(s.size(), 0),
        in_bytes_(s.size(), 0) {}

  SimulatedCall run() {
    for (size_t r = 0; r < s_.size(); ++r)
      push(EventKind::kStartBatch, reduce_s(first_reduce(r)), static_cast<int>(r), 0);
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      if (e.kind == EventKind::kStartBatch) start_batch(e.rank, e.t);
      if (e.kind == EventKind::kDepart) depart(e.rank, e.index, e.t);
      if (e.kind == EventKind::kArrive) arrive(e.rank, e.index, e.t);
      if (!error_.ok()) break;
    }
    SimulatedCall out;
    out.status = error_.ok() ? check_everything_met() : error_;
    for (size_t r = 0; r < s_.size(); ++r) {
      out.messages += s_[r].sends.size();
      if (ranks_[r].finished > out.seconds) {
        out.seconds = ranks_[r].finished;
        out.slowest_rank = static_cast<int>(r);
      }
      out.most_bytes_on_a_link = std::max({out.most_bytes_on_a_link, out_bytes_[r], in_bytes_[r]});
    }
    return out;
  }

 private:
  double reduce_s(size_t bytes) const { return bytes ? m_.reduce_s(static_cast<double>(bytes)) : 0.0; }
  size_t first_reduce(size_t r) const {
    return s_[r].batches.empty() ? s_[r].reduce_after : s_[r].batches[0].reduce_before;
  }
  void push(EventKind k, double t, int rank, uint32_t index) {
    events_.push(Event{t, order_++, k, rank, index});
  }
  bool same_host(int a, int b) const {
    return host_of_[static_cast<size_t>(a)] == host_of_[static_cast<size_t>(b)];
  }
  double wake_s(int a, int b) const {
    return (same_host(a, b) ? m_.shm_messages.latency_s : m_.network.latency_s) / 2;
  }

  void start_batch(int r, double t) {
    RankState& st = ranks_[static_cast<size_t>(r)];
    const RankSchedule& sched = s_[static_cast<size_t>(r)];
    if (st.batch == sched.batches.size()) {
      st.finished = t;
      return;
    }
    const TracedBatch& b = sched.batches[st.batch];
    st.pending = b.num_sends + b.num_recvs;
    st.batch_end = t;
    if (st.pending == 0) return next_batch(r);
    for (uint32_t i = 0; i < b.num_sends; ++i)
      push(EventKind::kDepart, t + m_.message_s * (i + 1), r, b.first_send + i);
    for (uint32_t i = 0; i < b.num_recvs; ++i) {
      const uint32_t idx = b.first_recv + i;
      if (!sched.recvs[idx].reposted) post_recv(r, idx, t);
    }
  }

  void depart(int r, uint32_t s, double t) {
    const TracedSend& msg = s_[static_cast<size_t>(r)].sends[s];
    const double n = static_cast<double>(msg.bytes);
    double last_byte, left;
    if (same_host(r, msg.peer)) {
      last_byte = left = t + n / m_.shm_messages.bytes_per_s;
    } else {
      const size_t h = static_cast<size_t>(host_of_[static_cast<size_t>(r)]);
      const size_t g = static_cast<size_t>(host_of_[static_cast<size_t>(msg.peer)]);
      const double wire = n / m_.network.bytes_per_s;
      const double out_start = std::max(t, egress_[h]);
      egress_[h] = out_start + wire;
      const double in_start = std::max(out_start, ingress_[g]);
      ingress_[g] = in_start + wire;
      left = egress_[h];
      last_byte = std::max(egress_[h], ingress_[g]);
      out_bytes_[h] += n;
      in_bytes_[g] += n;
    }
    push(EventKind::kArrive, last_byte + wake_s(r, msg.peer), r, s);
    complete_request(r, left);
  }

  void arrive(int src, uint32_t s, double t) {
    const TracedSend& msg = s_[static_cast<size_t>(src)].sends[s];
    Meeting& m = meetings_[Key{src, msg.peer, static_cast<uint32_t>(msg.kind), msg.tag}];
    if (m.waiting.empty()) {
      m.arrived.emplace_back(t, msg.bytes);
      return;
    }
    const auto [idx, posted] = m.waiting.front();
    m.waiting.erase(m.waiting.begin());
    if (!sizes_agree(src, msg.peer, msg.bytes, idx)) return;
    // Waited for: it wakes up; posted later (by a callback still to run): then.
    complete_recv(msg.peer, idx, t >= posted ? t + wake_s(src, msg.peer) : posted);
  }

  void post_recv(int r, uint32_t idx, double t) {
    const TracedRecv& rec = s_[static_cast<size_t>(r)].recvs[idx];
    Meeting& m = meetings_[Key{rec.peer, r, static_cast<uint32_t>(rec.kind), rec.tag}];
    if (m.arrived.empty()) {
      m.waiting.emplace_back(idx, t);
      return;
    }
    const auto [arrived, bytes] = m.arrived.front();
    m.arrived.erase(m.arrived.begin());
    if (!sizes_agree(rec.peer, r, bytes, idx)) return;
    complete_recv(r, idx, std::max(arrived, t));
  }

  bool sizes_agree(int src, int dst, size_t sent, uint32_t idx) {
    const TracedRecv& rec = s_[static_cast<size_t>(dst)].recvs[idx];
    if (sent == rec.bytes) return true;
    error_ =
        Status(StatusCode::kDesync, "rank " + std::to_string(dst) + " expects " + std::to_string(rec.bytes) +
                                        " bytes from rank " + std::to_string(src) + " (tag " +
                                        std::to_string(rec.tag) + "), which sends " + std::to_string(sent));
    return false;
  }

  void complete_recv(int r, uint32_t idx, double t) {
    RankState& st = ranks_[static_cast<size_t>(r)];
    const TracedRecv& rec = s_[static_cast<size_t>(r)].recvs[idx];
    const double done = std::max(t, st.cpu_free) + m_.message_s + reduce_s(rec.reduce_bytes);
    st.cpu_free = done;
    if (rec.next >= 0) post_recv(r, static_cast<uint32_t>(rec.next), done);
    complete_request(r, done);
  }

  void complete_request(int r, double t) {
    RankState& st = ranks_[static_cast<size_t>(r)];
    st.batch_end = std::max(st.batch_end, t);
    if (--st.pending == 0) next_batch(r);
  }

  void next_batch(int r) {
    RankState& st = ranks_[static_cast<size_t>(r)];
    const RankSchedule& sched = s_[static_cast<size_t>(r)];
    ++st.batch;
    const size_t reduced =
        st.batch < sched.batches.size() ? sched.batches[st.batch].reduce_before : sched.reduce_after;
    push(EventKind::kStartBatch, std::max(st.batch_end, st.cpu_free) + reduce_s(reduced), r, 0);
  }

  // After the last event: every rank finished and every message taken.
  Status check_everything_met() const {
    for (const auto& [key, m] : meetings_) {
      if (!m.waiting.empty())
        return Status(StatusCode::kDesync, "rank " + std::to_string(key.dst) +
                                               " waits for a message from rank " + std::to_string(key.src) +
                                               " (tag " + std::to_string(key.tag) + ") that it never sends");
      if (!m.arrived.empty())
        return Status(StatusCode::kDesync, "rank " + std::to_string(key.src) + "'s message to rank " +
                                               std::to_string(key.dst) + " (tag " + std::to_string(key.tag) +
                                               ", " + std::to_string(m.arrived.front().second) +
                                               " bytes) is never received");
    }
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (ranks_[r].finished < 0)
        return Status(StatusCode::kDesync, "rank " + std::to_string(r) + " never finishes its batch " +
                                               std::to_string(ranks_[r].batch));
    }
    return Status::ok_status();
  }

  const std::vector<RankSchedule>& s_;
  const std::vector<int>& host_of_;
  const CostModel& m_;
  std::vector<RankState> ranks_;
  std::vector<double> egress_, ingress_;      // by host (its lowest rank): when its link is free
  std::vector<double> out_bytes_, in_bytes_;  // by host
  std::unordered_map<Key, Meeting, KeyHash> meetings_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t order_ = 0;
  Status error_;
};

// The cheapest entry that runs `c` in `shape` over messages.
Algorithm cheapest_over_messages(Collective c, const GroupShape& shape, const CostModel& model,
                                 double bytes) {
  Algorithm best = Algorithm::kRing;
  double best_s = -1;
  for (const AlgorithmEntry& e : algorithm_registry()) {
    if (!runs_over_messages(e.algorithm) || !e.runs(c) || !why_cannot_run(e.algorithm, c, shape).empty())
      continue;
    const double s = e.cost(c, shape, model, bytes);
    if (best_s < 0 || s < best_s) {
      best = e.algorithm;
      best_s = s;
    }
  }
  return best;
}

}  // namespace

SimulatedCall simulate(const std::vector<RankSchedule>& schedules, const std::vector<int>& host_of,
                       const CostModel& model) {
  return Simulation(schedules, host_of, model).run();
}

std::vector<int> layout_host_of(int ranks, int hosts) {
  std::vector<int> host_of(static_cast<size_t>(ranks));
  int host_index = -1, leader = 0;
  for (int q = 0; q < ranks; ++q) {
    const int h = static_cast<int>(static_cast<int64_t>(q) * hosts / ranks);
    if (h != host_index) {
      host_index = h;
      leader = q;
    }
    host_of[static_cast<size_t>(q)] = leader;
  }
  return host_of;
}

Result<SimulationReport> run_simulation(const SimulationRequest& req, const CostModel& model) {
  if (req.ranks < 1 || req.hosts < 1 || req.hosts > req.ranks)
    return invalid_argument("a layout of " + std::to_string(req.ranks) + " ranks on " +
                            std::to_string(req.hosts) + " hosts (hosts must be 1 to ranks)");
  const GroupShape shape = GroupShape::of(req.ranks, req.hosts);
  SimulationReport report;
  auto table = AlgorithmTable::build(shape, model, "").choose(req.collective, req.bytes);
  if (!table.ok()) return table.status();
  report.table_choice = table.value();
  report.algorithm = report.table_choice;
  if (req.forced) {
    const std::string why = why_cannot_run(req.algorithm, req.collective, shape);
    if (!why.empty()) return invalid_argument(why);
    if (!runs_over_messages(req.algorithm))
      return invalid_argument(std::string(algorithm_name(req.algorithm)) +
                              " runs through shared memory, which the simulator does not trace");
    report.algorithm = req.algorithm;
  } else if (!runs_over_messages(report.algorithm)) {
    report.algorithm = cheapest_over_messages(req.collective, shape, model, static_cast<double>(req.bytes));
    report.substituted = true;
  }
  const size_t footprint = CallBuffers::footprint(req.collective, req.ranks, req.bytes);
  if (footprint > req.max_buffer_bytes)
    return invalid_argument("a rank's buffers would take " + std::to_string(footprint >> 20) +
                            " MiB, over the limit of " + std::to_string(req.max_buffer_bytes >> 20) + " MiB");
  const std::vector<int> host_of = layout_host_of(req.ranks, req.hosts);
  CallBuffers buffers(req.collective, req.ranks, req.bytes);
  std::vector<uint8_t> scratch;
  std::vector<RankSchedule> schedules;
  schedules.reserve(static_cast<size_t>(req.ranks));
  size_t messages = 0;
  for (int r = 0; r < req.ranks; ++r) {
    schedules.push_back(trace_rank(report.algorithm, buffers, r, host_of, scratch));
    const RankSchedule& s = schedules.back();
    if (!s.status.ok())
      return Status(s.status.code(), "rank " + std::to_string(r) + ": " + s.status.message());
    messages += s.messages();
    if (messages > req.max_messages)
      return invalid_argument("over " + std::to_string(req.max_messages) + " messages by rank " +
                              std::to_string(r) + " of " + std::to_string(req.ranks));
  }
  report.call = simulate(schedules, host_of, model);
  if (!report.call.status.ok()) return report.call.status;
  report.model_seconds =
      registry_entry(report.algorithm).cost(req.collective, shape, model, static_cast<double>(req.bytes));
  report.bound = lower_bound(req.collective, shape, model, static_cast<double>(req.bytes));
  return report;
}

}  // namespace cohort
