// cohort-top: watches a running cohort job through its store and names who
// its ranks wait for (docs/stragglers.md). Read-only: it changes nothing in
// the job and never stops it.
//
//   cohort-top [--group NAME] [--once] [--interval S] [--timeout S] HOST:PORT
//
// HOST:PORT is the job's store (MASTER_ADDR:MASTER_PORT). It authenticates
// as the job's ranks do: with COHORT_STORE_TOKEN when set. Every second
// (--interval) it prints a screen: per rank its host, current collective
// and sequence number, collectives a second, time inside collectives,
// time spent waiting and for whom, and how long the others waited for it;
// then the group's straggler, named with its host. --once prints one
// screen (once the group's first summary is in) and exits.
//
// Exits 0 after --once; 1 when the job ends while watched; 2 when there is
// no job to watch (nothing answers, the credential is refused, no cohort
// accounting in that store, a bad argument).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "cohort/errors.h"
#include "cohort/tcp_store.h"
#include "common/json.h"
#include "common/socket.h"
#include "diagnostics/arrival_accounting.h"
#include "diagnostics/straggler_stats.h"

namespace {

using cohort::Json;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string host;
  uint16_t port = 0;
  std::string group;
  bool once = false;
  double interval_s = 1;
  double timeout_s = 10;
};

int usage(const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "cohort-top: %s\n", why.c_str());
  std::fprintf(stderr,
               "usage: cohort-top [--group NAME] [--once] [--interval S] [--timeout S] HOST:PORT\n"
               "  HOST:PORT  the job's store (MASTER_ADDR:MASTER_PORT); COHORT_STORE_TOKEN if it has one\n");
  return 2;
}

bool parse_seconds(const char* text, double* out) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v > 0) || v > 3600) return false;
  *out = v;
  return true;
}

// Thrown where the watching ends; `code` is the exit status.
struct Stop {
  int code;
  std::string why;
};

class Watcher {
 public:
  explicit Watcher(const Options& o) : o_(o), address_(cohort::format_address(o.host, o.port)) {}

  void connect() {
    cohort::TcpStoreOptions so;
    so.port = o_.port;
    so.is_server = false;
    so.timeout = std::chrono::milliseconds(static_cast<int64_t>(o_.timeout_s * 1000));
    try {
      store_ = std::make_unique<cohort::TcpStore>(o_.host, so);
    } catch (const cohort::StoreError& e) {
      throw Stop{2, e.what()};  // the credential, or not a cohort store
    } catch (const std::exception& e) {
      throw Stop{2, "no store answers at " + address_ + " (" + e.what() + "): is a job running there?"};
    }
  }

  // find_group waits for the job's list of groups and picks ours.
  void find_group() {
    const std::string key = cohort::stragglers_groups_key();
    wait_for(key, "holds no cohort job's straggler accounting yet (no key " + key +
                      "): not a cohort job, one that has not run a collective, or one with "
                      "COHORT_STRAGGLER_INTERVAL_S=0");
    std::vector<std::string> names;
    const std::string list = cohort::to_string(get(key));
    for (size_t at = 0; at < list.size();) {
      const size_t nl = list.find('\n', at);
      const std::string name = list.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
      if (!name.empty()) names.push_back(name);
      at = nl == std::string::npos ? list.size() : nl + 1;
    }
    if (o_.group.empty()) {
      group_ = names.front();
      return;
    }
    for (const std::string& n : names) {
      if (n == o_.group) {
        group_ = n;
        return;
      }
    }
    std::string all;
    for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
    throw Stop{2, "the job at " + address_ + " has no group '" + o_.group + "'; its groups: " + all};
  }

  // screen reads the group's summary and records and prints them.
  void screen() {
    const std::string summary_key = cohort::stragglers_summary_key(group_);
    wait_for(summary_key, "has group " + group_ +
                              " but no summary of it yet (its rank 0 joins the ranks' "
                              "times every COHORT_STRAGGLER_INTERVAL_S)");
    auto summary = parse(get(summary_key), summary_key);
    // One screen should say something: wait (within --timeout) for the
    // first collectives to be joined.
    const auto until = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o_.timeout_s * 1000));
    while (o_.once && summary["collectives"].as_int() == 0 && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      summary = parse(get(summary_key), summary_key);
    }
    const int size = static_cast<int>(summary["size"].as_int());
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back(cohort::stragglers_rank_key(group_, r));
    std::vector<Json> records(static_cast<size_t>(size));
    if (call([&] { return store_->check(keys); })) {
      const auto values = call([&] { return store_->multi_get(keys); });
      for (int r = 0; r < size; ++r)
        records[static_cast<size_t>(r)] = parse(values[static_cast<size_t>(r)], keys[r]);
    }
    print(summary, records);
    const int64_t updated = summary["updated_us"].as_int();
    if (updated == last_updated_us_) {
      if (++stale_screens_ * o_.interval_s > 5 + 3 * o_.interval_s) {
        throw Stop{1, "the job at " + address_ + " stopped publishing (its summary is " +
                          std::to_string(stale_screens_) + " screens old): it ended while watched"};
      }
    } else {
      stale_screens_ = 0;
      last_updated_us_ = updated;
    }
  }

 private:
  template <class F>
  auto call(F f) -> decltype(f()) {
    try {
      return f();
    } catch (const std::exception& e) {
      throw Stop{watching_ ? 1 : 2, watching_ ? "the job at " + address_ + " ended while watched: " + e.what()
                                              : "the store at " + address_ + ": " + e.what()};
    }
  }
  cohort::Bytes get(const std::string& key) {
    return call([&] { return store_->get(key); });
  }
  Json parse(const cohort::Bytes& value, const std::string& key) {
    auto doc = Json::parse(cohort::to_string(value));
    if (!doc.ok())
      throw Stop{
          2, "the store at " + address_ + " holds a " + key + " that is not JSON: " + doc.status().message()};
    return doc.value();
  }
  void wait_for(const std::string& key, const std::string& otherwise) {
    const auto until = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o_.timeout_s * 1000));
    while (!call([&] { return store_->check({key}); })) {
      if (Clock::now() >= until) {
        throw Stop{watching_ ? 1 : 2, "the store at " + address_ + " " + otherwise};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    watching_ = true;
  }

  static std::string fixed(double v, int digits) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
  }

  void print(const Json& summary, const std::vector<Json>& records) {
    const std::time_t now = std::time(nullptr);
    char clock[16];
    std::strftime(clock, sizeof clock, "%H:%M:%S", std::localtime(&now));
    std::string out;
    if (!o_.once && ::isatty(1)) out += "\033[H\033[2J";
    out += "cohort-top " + address_ + "  group " + group_ + " (" + std::to_string(summary["size"].as_int()) +
           " ranks, " + std::to_string(summary["collectives"].as_int()) + " collectives joined)  " + clock +
           "\n";
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
      const std::string op = rec["op"].as_string() + (rec["running"].as_bool() ? "*" : "");
      std::snprintf(
          line, sizeof line, "%-5zu %-16.16s %-14.14s %8lld %8s %8s %9s %5s %6lld %12s %9s\n", i,
          rec["host"].as_string().c_str(), op.c_str(), static_cast<long long>(rec["started"].as_int()),
          fixed(rec["steps_per_s"].as_double(), 1).c_str(), fixed(rec["busy_s"].as_double(), 2).c_str(),
          fixed(s["wait_s"].as_double(), 2).c_str(),
          waited_for < 0 ? "-" : std::to_string(waited_for).c_str(),
          static_cast<long long>(s["times_last"].as_int()), fixed(s["waited_for_s"].as_double(), 2).c_str(),
          fixed(s["lateness_p50_s"].as_double() * 1e3, 1).c_str());
      out += line;
    }
    out += "straggler: " + cohort::straggler_line(summary) + "\n";
    out +=
        "(* running now; busy: time inside collectives; waited: for others, and for whom last; last: times "
        "it "
        "arrived last)\n";
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
  }

  const Options o_;
  const std::string address_;
  std::unique_ptr<cohort::TcpStore> store_;
  std::string group_;
  bool watching_ = false;  // the job was found: a failure now means it ended
  int64_t last_updated_us_ = 0;
  int stale_screens_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string address;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--once") {
      o.once = true;
    } else if (a == "--group" && has_value) {
      o.group = argv[++i];
    } else if ((a == "--interval" || a == "--timeout") && has_value) {
      if (!parse_seconds(argv[++i], a == "--interval" ? &o.interval_s : &o.timeout_s)) {
        return usage(a + " takes seconds (0 < S <= 3600), not '" + argv[i] + "'");
      }
    } else if (a[0] == '-' || !address.empty()) {
      return usage("unexpected argument '" + a + "'");
    } else {
      address = a;
    }
  }
  if (address.empty()) return usage("");
  if (!cohort::split_address(address, &o.host, &o.port) || o.port == 0) {
    return usage("'" + address + "' is not HOST:PORT");
  }
  Watcher w(o);
  try {
    w.connect();
    w.find_group();
    for (;;) {
      w.screen();
      if (o.once) return 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(o.interval_s * 1000)));
    }
  } catch (const Stop& s) {
    std::fprintf(stderr, "cohort-top: %s\n", s.why.c_str());
    return s.code;
  }
}
