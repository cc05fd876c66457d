#include "diagnostics/top_screen.h"

#include <cstdio>
#include <ctime>

#include "diagnostics/straggler_stats.h"

namespace cohort {
namespace {

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string top_screen(const std::string& address, const std::string& group, const Json& summary,
                       const std::vector<Json>& records) {
  const std::time_t now = std::time(nullptr);
  char clock[16];
  std::strftime(clock, sizeof clock, "%H:%M:%S", std::localtime(&now));
  std::string out = "cohort-top " + address + "  group " + group + " (" +
                    std::to_string(summary["size"].as_int()) + " ranks, " +
                    std::to_string(summary["collectives"].as_int()) + " collectives joined)  " + clock + "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-5s %-16s %-14s %8s %8s %8s %9s %5s %6s %12s %9s\n", "rank", "host",
                "op", "seq", "steps/s", "busy s", "waited s", "for", "last", "waited on s", "late ms");
  out += line;
  std::vector<Json> by_rank(records.size());
  for (const Json& r : summary["ranks"].items()) {
    const size_t i = static_cast<size_t>(r["rank"].as_int());
    if (i < by_rank.size()) by_rank[i] = r;
  }
  for (size_t i = 0; i < records.size(); ++i) {
    const Json& rec = records[i];
    const Json& s = by_rank[i];
    const int64_t waited_for = s["last_waited_for"].as_int(-1);
    const std::string whom = waited_for < 0 ? "-" : std::to_string(waited_for);
    const std::string op = rec["op"].as_string() + (rec["running"].as_bool() ? "*" : "");
    std::snprintf(
        line, sizeof line, "%-5zu %-16.16s %-14.14s %8lld %8s %8s %9s %5s %6lld %12s %9s\n", i,
        rec["host"].as_string().c_str(), op.c_str(), static_cast<long long>(rec["started"].as_int()),
        fixed(rec["steps_per_s"].as_double(), 1).c_str(), fixed(rec["busy_s"].as_double(), 2).c_str(),
        fixed(s["wait_s"].as_double(), 2).c_str(), whom.c_str(),
        static_cast<long long>(s["times_last"].as_int()), fixed(s["waited_for_s"].as_double(), 2).c_str(),
        fixed(s["lateness_p50_s"].as_double() * 1e3, 1).c_str());
    out += line;
  }
  out += "straggler: " + straggler_line(summary) + "\n";
  out +=
      "(* running now; busy: time inside collectives; waited: for others, and for whom last; last: times it "
      "arrived last)\n";
  return out;
}

}  // namespace cohort
