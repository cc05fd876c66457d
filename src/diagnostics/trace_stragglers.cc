#include "diagnostics/trace_stragglers.h"

#include <cstdio>
#include <map>

#include "diagnostics/straggler_stats.h"

namespace cohort {
namespace {

struct Timed {
  int64_t duration_ns;
  std::string op;
  uint64_t bytes;
};

// One group as the dumps show it: per group rank, its completed
// collectives by sequence number.
struct GroupView {
  int size = 0;
  std::vector<int> global_ranks;
  std::map<int, std::map<uint64_t, Timed>> by_rank;
  std::map<int, std::string> hosts;  // group rank -> host
};

uint64_t bytes_of(const TraceRecord& r) {
  static const std::map<std::string, uint64_t> kSizes = {
      {"float32", 4}, {"float64", 8}, {"float16", 2}, {"bfloat16", 2}, {"int8", 1},
      {"uint8", 1},   {"int16", 2},   {"int32", 4},   {"int64", 8},    {"bool", 1}};
  auto it = kSizes.find(r.dtype);
  return std::max(r.input_count, r.output_count) * (it == kSizes.end() ? 1 : it->second);
}

std::string ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s * 1e3);
  return buf;
}

std::string secs(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", s);
  return buf;
}

std::string rank_name(const GroupView& g, int rank) {
  const int global = g.global_ranks[static_cast<size_t>(rank)];
  return "rank " + std::to_string(rank) + (global != rank ? " (global " + std::to_string(global) + ")" : "");
}

// report_group adds the group's lines to `out` and returns its statistics
// (null when a dump is missing).
Json report_group(const std::string& name, const GroupView& g, StragglerVerdict* out) {
  std::vector<int> missing;
  for (int r = 0; r < g.size; ++r) {
    if (!g.by_rank.count(r)) missing.push_back(r);
  }
  if (!missing.empty()) {
    std::string list;
    for (int r : missing) list += (list.empty() ? "" : ",") + std::to_string(r);
    out->lines.push_back("group " + name + ": no dump from ranks {" + list +
                         "}; who waited for whom needs every rank's times");
    out->incomplete = true;
    return Json();
  }
  StragglerStats stats(g.size);
  std::map<std::string, uint64_t> concerned;  // "all_reduce 16 B" -> count
  std::vector<int64_t> durations(static_cast<size_t>(g.size));
  for (const auto& [seq, first] : g.by_rank.at(0)) {
    bool everyone = true;
    for (int r = 0; r < g.size && everyone; ++r) {
      const auto& mine = g.by_rank.at(r);
      auto it = mine.find(seq);
      everyone = it != mine.end() && it->second.op == first.op;
      if (everyone) durations[static_cast<size_t>(r)] = it->second.duration_ns;
    }
    if (!everyone) continue;
    stats.add(durations, first.op, first.bytes);
  }
  std::vector<std::string> hosts(static_cast<size_t>(g.size));
  for (const auto& [r, h] : g.hosts) hosts[static_cast<size_t>(r)] = h;
  Json j = stats.to_json(hosts);
  j.set("group", name);
  j.set("size", g.size);
  out->lines.push_back("group " + name + ": " + std::to_string(stats.collectives()) +
                       " collectives that every rank leaves together, in all " + std::to_string(g.size) +
                       " dumps");
  if (stats.collectives() == 0) return j;
  out->lines.push_back("  ranks by the time the others waited for them:");
  for (const StragglerStats::RankView& v : stats.ranking()) {
    out->lines.push_back("  " + rank_name(g, v.rank) + " on " + hosts[static_cast<size_t>(v.rank)] +
                         ": last in " + std::to_string(v.times_last) + ", the others waited " +
                         secs(v.waited_for_s) + " s for it; late by p50 " + ms(v.lateness_p50_s) + " / p90 " +
                         ms(v.lateness_p90_s) + " / max " + ms(v.lateness_max_s) + " ms; it waited " +
                         secs(v.wait_s) + " s itself");
  }
  out->lines.push_back("  straggler: " + straggler_line(j));
  out->named = out->named || stats.straggler() >= 0;
  std::string ops;
  for (const StragglerStats::OpView& o : stats.ops()) {
    ops += (ops.empty() ? "" : ", ") + o.op + " " + std::to_string(o.size_class) + " B x" +
           std::to_string(o.count);
  }
  out->lines.push_back("  collectives concerned: " + ops);
  return j;
}

}  // namespace

StragglerVerdict analyze_stragglers(const std::vector<RankDump>& dumps) {
  std::map<std::string, GroupView> groups;
  for (const RankDump& d : dumps) {
    for (const GroupDump& g : d.groups) {
      GroupView& view = groups[g.name];
      view.size = g.size;
      view.global_ranks = g.global_ranks;
      view.hosts[g.rank] = d.host;
      auto& mine = view.by_rank[g.rank];
      for (const TraceRecord& r : g.entries) {
        if (!r.collective || r.state != OpState::kCompleted || !leaves_together(r.op)) continue;
        mine[r.sequence] = Timed{(r.ended_us - r.started_us) * 1000, r.op, bytes_of(r)};
      }
    }
  }
  StragglerVerdict out;
  Json list = Json::array();
  for (const auto& [name, g] : groups) {
    Json j = report_group(name, g, &out);
    if (!j.is_null()) list.push(std::move(j));
  }
  out.json = Json::object();
  out.json.set("groups", std::move(list));
  return out;
}

}  // namespace cohort
