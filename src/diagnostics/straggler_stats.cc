#include "diagnostics/straggler_stats.h"

#include <algorithm>
#include <cstdio>

namespace cohort {
namespace {

// bus_factor is nccl-tests' factor from algorithm to bus bandwidth.
double bus_factor(int op, int ranks) {
  if (ranks < 2) return 0;
  const double n = ranks;
  return op == 0 ? 2 * (n - 1) / n : (n - 1) / n;
}

int size_class_of(uint64_t bytes) {
  int c = 0;
  while (c + 1 < 48 && (uint64_t{1} << c) < bytes) ++c;
  return c;
}

double seconds(int64_t ns) {
  return static_cast<double>(ns) / 1e9;
}

}  // namespace

int leave_together_index(std::string_view op) {
  CollectiveCall call;
  return parse_call(op, &call) ? straggler_index(call_info(call).family) : -1;
}

bool leaves_together(std::string_view op) {
  return leave_together_index(op) >= 0;
}

StragglerStats::StragglerStats(int ranks) : ranks_(static_cast<size_t>(std::max(ranks, 0))) {}

void StragglerStats::add(const std::vector<int64_t>& durations_ns, std::string_view op, uint64_t bytes) {
  const int kind = leave_together_index(op);
  if (kind < 0 || durations_ns.size() != ranks_.size() || ranks_.empty()) return;
  const auto [least, most] = std::minmax_element(durations_ns.begin(), durations_ns.end());
  const int last = static_cast<int>(least - durations_ns.begin());
  ++collectives_;
  PerRank& l = ranks_[static_cast<size_t>(last)];
  ++l.times_last;
  l.recent[l.recent_count++ % kRecentLateness] = *most - *least;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const int64_t waited = durations_ns[r] - *least;
    if (waited <= 0) continue;
    l.waited_for_ns += waited;
    ranks_[r].wait_ns += waited;
    ranks_[r].last_waited_for = last;
  }
  PerOp& o = ops_[static_cast<size_t>(kind)][static_cast<size_t>(size_class_of(bytes))];
  ++o.count;
  o.bus_bytes += static_cast<double>(bytes) * bus_factor(kind, ranks());
  o.work_ns += *least;
}

StragglerStats::RankView StragglerStats::rank(int r) const {
  const PerRank& p = ranks_[static_cast<size_t>(r)];
  RankView v;
  v.rank = r;
  v.times_last = p.times_last;
  v.waited_for_s = seconds(p.waited_for_ns);
  v.wait_s = seconds(p.wait_ns);
  v.last_waited_for = p.last_waited_for;
  const size_t n = std::min(p.recent_count, kRecentLateness);
  if (n == 0) return v;
  std::vector<int64_t> sorted(p.recent.begin(), p.recent.begin() + static_cast<std::ptrdiff_t>(n));
  std::sort(sorted.begin(), sorted.end());
  v.lateness_p50_s = seconds(sorted[(n - 1) / 2]);
  v.lateness_p90_s = seconds(sorted[std::min(n - 1, (n * 9) / 10)]);
  v.lateness_max_s = seconds(sorted.back());
  return v;
}

std::vector<StragglerStats::RankView> StragglerStats::ranking() const {
  std::vector<RankView> out;
  for (int r = 0; r < ranks(); ++r) out.push_back(rank(r));
  std::stable_sort(out.begin(), out.end(),
                   [](const RankView& a, const RankView& b) { return a.waited_for_s > b.waited_for_s; });
  return out;
}

std::vector<StragglerStats::OpView> StragglerStats::ops() const {
  std::vector<OpView> out;
  for (int k = 0; k < kOps; ++k) {
    for (int c = 0; c < kClasses; ++c) {
      const PerOp& o = ops_[static_cast<size_t>(k)][static_cast<size_t>(c)];
      if (o.count == 0) continue;
      OpView v;
      v.op = collective_name(leave_together_family(k));
      v.size_class = uint64_t{1} << c;
      v.count = o.count;
      v.busbw_gbs = o.work_ns > 0 ? o.bus_bytes / static_cast<double>(o.work_ns) : 0;  // bytes/ns = GB/s
      out.push_back(v);
    }
  }
  return out;
}

int StragglerStats::straggler() const {
  if (collectives_ == 0) return -1;
  const RankView top = ranking().front();
  const double share = static_cast<double>(top.times_last) / static_cast<double>(collectives_);
  if (share < kStragglerMinShareLast || top.lateness_p50_s * 1e9 < kStragglerMinLatenessNs) return -1;
  return top.rank;
}

Json StragglerStats::to_json(const std::vector<std::string>& hosts) const {
  Json out = Json::object();
  out.set("collectives", collectives_);
  out.set("straggler", straggler());
  Json ranks = Json::array();
  for (const RankView& v : ranking()) {
    Json r = Json::object();
    r.set("rank", v.rank);
    if (static_cast<size_t>(v.rank) < hosts.size()) r.set("host", hosts[static_cast<size_t>(v.rank)]);
    r.set("times_last", v.times_last);
    r.set("waited_for_s", v.waited_for_s);
    r.set("wait_s", v.wait_s);
    r.set("last_waited_for", v.last_waited_for);
    r.set("lateness_p50_s", v.lateness_p50_s);
    r.set("lateness_p90_s", v.lateness_p90_s);
    r.set("lateness_max_s", v.lateness_max_s);
    ranks.push(std::move(r));
  }
  out.set("ranks", std::move(ranks));
  Json ops = Json::array();
  for (const OpView& v : this->ops()) {
    Json o = Json::object();
    o.set("op", v.op);
    o.set("size_class", v.size_class);
    o.set("count", v.count);
    o.set("busbw_gbs", v.busbw_gbs);
    ops.push(std::move(o));
  }
  out.set("ops", std::move(ops));
  return out;
}

std::string straggler_line(const Json& summary) {
  const int64_t straggler = summary["straggler"].as_int(-1);
  const std::string of = std::to_string(summary["collectives"].as_int()) + " collectives of group " +
                         summary["group"].as_string();
  for (const Json& r : summary["ranks"].items()) {
    if (r["rank"].as_int() != straggler) continue;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "rank %lld on %s: last in %lld of %s, median %.1f ms late; the others waited %.2f s for it",
                  static_cast<long long>(straggler), r["host"].as_string().c_str(),
                  static_cast<long long>(r["times_last"].as_int()), of.c_str(),
                  r["lateness_p50_s"].as_double() * 1e3, r["waited_for_s"].as_double());
    return buf;
  }
  return "none named in " + of + " (no rank was last in half of them by a median of 1 ms or more)";
}

}  // namespace cohort
