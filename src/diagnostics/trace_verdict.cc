#include "diagnostics/trace_verdict.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "common/collective.h"

namespace cohort {
namespace {

// count_rule: which recorded count must agree between ranks for the call
// the recorder names `op` (common/collective.h).
SameCount count_rule(const std::string& op) {
  CollectiveCall call;
  return parse_call(op, &call) ? call_info(call).recorded_count : SameCount::kNone;
}

std::string rank_set(const std::vector<int>& ranks) {
  std::string s = "{";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s + "}";
}

// One rank's view of one group.
struct View {
  int rank;  // global
  const GroupDump* group;
};

const TraceRecord* find_record(const GroupDump& g, uint64_t sequence, bool collective) {
  for (const TraceRecord& r : g.entries) {
    if (r.collective == collective && r.sequence == sequence) return &r;
  }
  return nullptr;
}

// signature is what must agree between ranks for a collective.
std::string signature(const TraceRecord& r) {
  std::string s = r.op;
  if (!r.dtype.empty()) s += " " + r.dtype;
  switch (count_rule(r.op)) {
    case SameCount::kInput:
      s += " count " + std::to_string(r.input_count);
      break;
    case SameCount::kOutput:
      s += " output count " + std::to_string(r.output_count);
      break;
    case SameCount::kNone:
      break;
  }
  if (r.peer >= 0) s += " root " + std::to_string(r.peer);
  return s;
}

std::string seconds_between(int64_t from_us, int64_t to_us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(to_us - from_us) / 1e6);
  return buf;
}

// Analysis of one group across the ranks that dumped it.
class GroupVerdict {
 public:
  GroupVerdict(const std::string& name, std::vector<View> views, Verdict* out)
      : name_(name), views_(std::move(views)), out_(out) {}

  void run() {
    mismatches();
    stuck_collective();
    pending_p2p();
  }

 private:
  void add(const std::string& line, bool problem = true) {
    out_->lines.push_back(line);
    out_->problems |= problem;
  }

  // mismatches reports sequence numbers under which ranks recorded
  // different collectives (only where every such rank's ring has it).
  void mismatches() {
    std::map<uint64_t, std::map<std::string, std::vector<int>>> by_sequence;
    for (const View& v : views_) {
      for (const TraceRecord& r : v.group->entries) {
        if (r.collective) by_sequence[r.sequence][signature(r)].push_back(v.rank);
      }
    }
    for (const auto& [sequence, signatures] : by_sequence) {
      if (signatures.size() < 2) continue;
      std::string line = "group " + name_ + " collective #" + std::to_string(sequence) + ": ranks disagree:";
      bool first = true;
      for (const auto& [sig, ranks] : signatures) {
        line += std::string(first ? " " : "; ") + "ranks " + rank_set(ranks) + " called " + sig;
        first = false;
      }
      add(line);
    }
  }

  const TraceRecord* any_record(uint64_t sequence) const {
    for (const View& v : views_) {
      if (const TraceRecord* r = find_record(*v.group, sequence, true)) return r;
    }
    return nullptr;
  }

  // stuck_collective finds the first collective not every rank completed.
  void stuck_collective() {
    uint64_t lowest_completed = UINT64_MAX, most_enqueued = 0;
    for (const View& v : views_) {
      lowest_completed = std::min(lowest_completed, v.group->collectives.completed);
      most_enqueued = std::max(most_enqueued, v.group->collectives.enqueued);
    }
    const uint64_t s = lowest_completed + 1;
    if (s > most_enqueued) {
      add("group " + name_ + ": in step; " +
              (lowest_completed == 0 ? std::string("no collective was issued")
                                     : "every rank completed collective #" +
                                           std::to_string(lowest_completed) + " and none is pending"),
          false);
      return;
    }
    std::string what = "collective #" + std::to_string(s);
    if (const TraceRecord* r = any_record(s)) {
      const std::string size = record_size_text(*r);
      what += " (" + r->op + (size.empty() ? "" : ", " + size) + ")";
    }
    std::vector<int> never, started, completed;
    std::string lasts;
    for (const View& v : views_) {
      const Progress& p = v.group->collectives;
      if (p.started < s) {
        never.push_back(v.rank);
        lasts += std::string(lasts.empty() ? "" : ", ") + "rank " + std::to_string(v.rank) +
                 "'s last completed is #" + std::to_string(p.completed);
      } else if (p.completed >= s) {
        completed.push_back(v.rank);
      } else {
        started.push_back(v.rank);
      }
    }
    std::string line = "group " + name_ + " " + what + ": ";
    if (!never.empty()) {
      line += "ranks " + rank_set(never) + " never started it; " + lasts;
    } else if (!completed.empty()) {
      line += "ranks " + rank_set(completed) + " completed it; ranks " + rank_set(started) +
              " started it and did not complete it";
    } else {
      line += "every rank that left a dump started it and none completed it (look at how it failed below)";
    }
    add(line);
    // How it went on each rank that started it.
    for (const View& v : views_) {
      const TraceRecord* r = find_record(*v.group, s, true);
      if (!r || r->state == OpState::kScheduled || r->state == OpState::kCompleted) continue;
      std::string detail = "  rank " + std::to_string(v.rank) + ": " + op_state_name(r->state);
      if (r->state == OpState::kFailed) {
        detail += " after " + seconds_between(r->started_us, r->ended_us) + ": " + r->error;
      }
      add(detail);
    }
  }

  // pending_p2p lists point-to-point operations a rank had in flight.
  void pending_p2p() {
    for (const View& v : views_) {
      for (const TraceRecord& r : v.group->entries) {
        if (r.collective || r.state != OpState::kStarted) continue;
        add("group " + name_ + ": rank " + std::to_string(v.rank) + "'s " + record_text(r) +
            " was still in flight when it dumped");
      }
    }
  }

  const std::string name_;
  const std::vector<View> views_;
  Verdict* out_;
};

}  // namespace

Verdict analyze_dumps(const std::vector<RankDump>& dumps) {
  Verdict verdict;
  if (dumps.empty()) {
    verdict.lines.push_back("no dumps to read");
    verdict.problems = true;
    return verdict;
  }
  // Groups in the order the lowest rank lists them; views in rank order.
  std::vector<std::string> order;
  std::map<std::string, std::vector<View>> groups;
  std::set<int> have, expected;
  std::vector<const RankDump*> sorted;
  for (const RankDump& d : dumps) sorted.push_back(&d);
  std::sort(sorted.begin(), sorted.end(),
            [](const RankDump* a, const RankDump* b) { return a->global_rank < b->global_rank; });
  for (const RankDump* d : sorted) {
    have.insert(d->global_rank);
    for (const GroupDump& g : d->groups) {
      if (!groups.count(g.name)) order.push_back(g.name);
      groups[g.name].push_back(View{d->global_rank, &g});
      expected.insert(g.global_ranks.begin(), g.global_ranks.end());
    }
  }
  std::vector<int> missing;
  for (int r : expected) {
    if (!have.count(r)) missing.push_back(r);
  }
  if (!missing.empty()) {
    verdict.lines.push_back("ranks " + rank_set(missing) + " left no dump (they may be stopped, dead, or " +
                            "not have COHORT_TRACE_DIR set); what they did is unknown");
    verdict.problems = true;
  }
  for (const std::string& name : order) {
    // A rank that dumped without the group had destroyed it (or never made
    // it): it will not join the group's collectives either.
    std::vector<int> without;
    for (int r : groups[name].front().group->global_ranks) {
      bool listed = false;
      for (const View& v : groups[name]) listed |= v.rank == r;
      if (have.count(r) && !listed) without.push_back(r);
    }
    if (!without.empty()) {
      verdict.lines.push_back("group " + name + ": ranks " + rank_set(without) +
                              " dumped without it (they destroyed it, or never made it)");
      verdict.problems = true;
    }
    GroupVerdict(name, groups[name], &verdict).run();
  }
  return verdict;
}

}  // namespace cohort
