// cohort-top: watches a running cohort job through its store and names who
// its ranks wait for (docs/stragglers.md). Read-only: it changes nothing in
// the job and never stops it.
//
//   cohort-top [--group NAME] [--once] [--interval S] [--timeout S] HOST:PORT
//   cohort-top --rdzv-id ID [...] RDZV_HOST:RDZV_PORT
//
// HOST:PORT is the job's store (MASTER_ADDR:MASTER_PORT). With --rdzv-id
// it is cohortrun's rendezvous store (--rdzv-endpoint, the c10d/static
// store backend), where the job's store of the current round is found, and
// found again after a restart. It authenticates
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
#include "diagnostics/top_screen.h"

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
  std::string rdzv_id;  // set: host and port are the rendezvous store's
};

int usage(const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "cohort-top: %s\n", why.c_str());
  std::fprintf(stderr,
               "usage: cohort-top [--group NAME] [--once] [--interval S] [--timeout S] HOST:PORT\n"
               "       cohort-top --rdzv-id ID [...] RDZV_HOST:RDZV_PORT\n"
               "  HOST:PORT  the job's store (MASTER_ADDR:MASTER_PORT); COHORT_STORE_TOKEN if it has one\n"
               "  --rdzv-id  find it through cohortrun's rendezvous store (--rdzv-endpoint, --rdzv-id)\n");
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

std::unique_ptr<cohort::TcpStore> connect_store(const std::string& host, uint16_t port, double timeout_s,
                                                const std::string& what) {
  cohort::TcpStoreOptions so;
  so.port = port;
  so.is_server = false;
  so.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  const std::string address = cohort::format_address(host, port);
  try {
    return std::make_unique<cohort::TcpStore>(host, so);
  } catch (const cohort::StoreError& e) {
    const std::string why = e.what();
    if (why.find("did not answer like a cohort store") != std::string::npos) {
      throw Stop{2, why +
                        "; a Python job's store is torch's TCPStore: watch it with "
                        "`python -m cohort_torch.top " +
                        address + "`"};
    }
    throw Stop{2, why};  // the credential
  } catch (const std::exception& e) {
    throw Stop{2, "no store answers at " + address + " (" + e.what() + "): is " + what + " running there?"};
  }
}

// Round is where cohortrun's rendezvous says the job's store is now.
struct Round {
  int number = -1;
  std::string host;
  uint16_t port = 0;
};

// find_round reads the current round of run `id` from the rendezvous
// store at host:port (the keys of launcher/dynamic_rendezvous), waiting
// within the timeout for node 0 to publish the round's master.
Round find_round(const Options& o, const std::string& host, uint16_t port) {
  auto store = connect_store(host, port, o.timeout_s, "a cohortrun rendezvous");
  const std::string address = cohort::format_address(host, port);
  const std::string prefix = "rdzv/" + o.rdzv_id + "/";
  const auto until = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  try {
    for (;;) {
      if (store->check({prefix + "round"})) {
        Round r;
        r.number = std::atoi(cohort::to_string(store->get(prefix + "round")).c_str());
        const std::string master = prefix + "round/" + std::to_string(r.number) + "/master";
        if (store->check({master})) {
          const std::string text = cohort::to_string(store->get(master));  // "host port"
          const size_t space = text.find(' ');
          r.host = text.substr(0, space);
          r.port = static_cast<uint16_t>(std::atoi(text.c_str() + space + 1));
          return r;
        }
      }
      if (Clock::now() >= until) {
        throw Stop{2, "the rendezvous store at " + address + " has no running round of run '" + o.rdzv_id +
                          "' (no key " + prefix + "round with its master): is the --rdzv-id right?"};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  } catch (const Stop&) {
    throw;
  } catch (const std::exception& e) {
    throw Stop{2, "the rendezvous store at " + address + ": " + e.what()};
  }
}

class Watcher {
 public:
  explicit Watcher(const Options& o) : o_(o), address_(cohort::format_address(o.host, o.port)) {}

  void connect() { store_ = connect_store(o_.host, o_.port, o_.timeout_s, "a job"); }

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
      if (watching_) throw Stop{1, "the job at " + address_ + " ended while watched: " + e.what()};
      // torch's TCPStore (a Python job's env:// store) never answers cohort's hello.
      throw Stop{2, "the store at " + address_ + ": " + e.what() +
                        "; if the job is a Python one, its store is torch's TCPStore: watch it with "
                        "`python -m cohort_torch.top " +
                        address_ + "`"};
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

  void print(const Json& summary, const std::vector<Json>& records) {
    std::string out = !o_.once && ::isatty(1) ? "\033[H\033[2J" : "";
    out += cohort::top_screen(address_, group_, summary, records);
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
    } else if (a == "--rdzv-id" && has_value) {
      o.rdzv_id = argv[++i];
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
  // Watch the job at o.host:o.port; through a rendezvous, follow it from
  // round to round.
  const std::string rdzv_host = o.host;
  const uint16_t rdzv_port = o.port;
  int round = -1;
  try {
    for (;;) {
      if (!o.rdzv_id.empty()) {
        Round r;
        try {
          r = find_round(o, rdzv_host, rdzv_port);
        } catch (const Stop& s) {
          // Once watched, a rendezvous that is gone (its launcher left) is the job's end.
          if (round < 0) throw;
          throw Stop{1, "the job of run '" + o.rdzv_id + "' ended while watched: " + s.why};
        }
        if (r.number <= round) throw Stop{1, "the job of run '" + o.rdzv_id + "' ended while watched"};
        if (round >= 0)
          std::fprintf(stderr, "cohort-top: the job restarted (rendezvous round %d)\n", r.number);
        round = r.number;
        o.host = r.host;
        o.port = r.port;
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
        if (o.rdzv_id.empty() || s.code != 1) throw;
        std::fprintf(stderr, "cohort-top: %s\n", s.why.c_str());
        std::this_thread::sleep_for(std::chrono::milliseconds(500));  // a restart publishes its round
      }
    }
  } catch (const Stop& s) {
    std::fprintf(stderr, "cohort-top: %s\n", s.why.c_str());
    return s.code;
  }
}
