// cohort-sim: the real algorithms' schedules at up to 16K ranks, played
// out under the cost model (algorithms/schedule_sim.h), beside the model's
// analytic price and the lower bound.
//
//   cohort-sim [--ranks 16,1K,16K] [--per-host N] [--collectives all_reduce,...]
//              [--sizes 4,64K,16M] [--algo NAME] [--latency-us US] [--gbits G]
//
// Every rank of the group runs the algorithm's own code against a tracing
// transport (no data moves); the simulation then times every message over
// the links of the layout: each rank its own host, or --per-host N ranks a
// host sharing memory. The algorithm is the table's choice (or --algo); a
// choice that runs through shared memory, which cannot be traced, is
// replaced by the cheapest message-passing entry and marked '*'. The cost
// model is the one groups use (COHORT_COST_TCP_US, COHORT_LINK_GBITS),
// with --latency-us and --gbits over it. Prints a markdown table; a call
// the simulator refuses (buffers over 1 GiB a rank, over 32M messages)
// says why in its row. Exit code 2 on bad arguments.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/schedule_sim.h"
#include "algorithms/selection.h"
#include "common/split.h"

namespace {

using cohort::Collective;

struct Options {
  std::vector<int> ranks{16, 1024, 16384};
  int per_host = 1;
  std::vector<Collective> collectives{Collective::kAllReduce,     Collective::kAllGather,
                                      Collective::kReduceScatter, Collective::kBroadcast,
                                      Collective::kReduce,        Collective::kAllToAll};
  std::vector<size_t> sizes{4, 64 << 10, 16 << 20};
  bool forced = false;
  cohort::Algorithm algorithm = cohort::Algorithm::kRing;
  double latency_us = 0, gbits = 0;
};

int usage(const std::string& why) {
  std::fprintf(stderr,
               "cohort-sim: %s\nusage: cohort-sim [--ranks 16,1K,16K] [--per-host N] [--collectives "
               "all_reduce,...] [--sizes 4,64K,16M] [--algo NAME] [--latency-us US] [--gbits G]\n",
               why.c_str());
  return 2;
}

bool parse_sizes(const std::string& text, std::vector<size_t>* out) {
  out->clear();
  for (const std::string& item : cohort::split(text, ',')) {
    size_t v = 0;
    if (!cohort::parse_size(item, &v)) return false;
    out->push_back(v);
  }
  return !out->empty();
}

bool parse_positive(const char* text, double* out) {
  char* end = nullptr;
  *out = std::strtod(text, &end);
  return end != text && *end == '\0' && *out > 0;
}

// parse: the options, or an exit code in *exit_code.
bool parse(int argc, char** argv, Options* o, int* exit_code) {
  for (int k = 1; k < argc; ++k) {
    const std::string flag = argv[k];
    if (k + 1 >= argc) {
      *exit_code = usage(flag + " needs a value");
      return false;
    }
    const std::string value = argv[++k];
    std::vector<size_t> list;
    double number = 0;
    if (flag == "--ranks" && parse_sizes(value, &list)) {
      o->ranks.clear();
      for (size_t p : list) {
        if (p < 1 || p > (1u << 20)) {
          *exit_code = usage("--ranks " + std::to_string(p) + " is not 1 to 1M");
          return false;
        }
        o->ranks.push_back(static_cast<int>(p));
      }
    } else if (flag == "--per-host" && parse_sizes(value, &list) && list.size() == 1 && list[0] >= 1) {
      o->per_host = static_cast<int>(list[0]);
    } else if (flag == "--sizes" && parse_sizes(value, &list)) {
      o->sizes = list;
    } else if (flag == "--collectives") {
      o->collectives.clear();
      for (const std::string& name : cohort::split(value, ',')) {
        Collective c;
        if (!cohort::parse_collective(name, &c)) {
          *exit_code = usage("'" + name + "' is not a collective");
          return false;
        }
        o->collectives.push_back(c);
      }
    } else if (flag == "--algo" && cohort::parse_algorithm(value, &o->algorithm)) {
      o->forced = true;
    } else if (flag == "--latency-us" && parse_positive(value.c_str(), &number)) {
      o->latency_us = number;
    } else if (flag == "--gbits" && parse_positive(value.c_str(), &number)) {
      o->gbits = number;
    } else {
      *exit_code = usage("cannot take " + flag + " '" + value + "'");
      return false;
    }
  }
  return true;
}

std::string size_text(size_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

void print_row(const Options& o, const cohort::CostModel& model, Collective c, int ranks, size_t bytes) {
  cohort::SimulationRequest req;
  req.collective = c;
  req.bytes = bytes;
  req.ranks = ranks;
  req.hosts = o.per_host > 1 ? (ranks + o.per_host - 1) / o.per_host : ranks;
  req.forced = o.forced;
  req.algorithm = o.algorithm;
  std::printf("| %s | %d | %d | %s |", cohort::collective_name(c), ranks, req.hosts,
              size_text(bytes).c_str());
  auto report = cohort::run_simulation(req, model);
  if (!report.ok()) {
    std::printf(" not simulated: %s | | | | | |\n", report.status().message().c_str());
    return;
  }
  const cohort::SimulationReport& r = report.value();
  std::printf(" %s%s | %.1f | %.1f | %.1f (%s) | %.2f | %zu |\n", cohort::algorithm_name(r.algorithm),
              r.substituted ? "*" : "", r.call.seconds * 1e6, r.model_seconds * 1e6, r.bound.seconds * 1e6,
              r.bound.latency_bound ? "latency" : "bytes", r.call.seconds / r.bound.seconds, r.call.messages);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int exit_code = 0;
  if (!parse(argc, argv, &o, &exit_code)) return exit_code;
  cohort::CostModel model = cohort::CostModel::from_config();
  if (o.latency_us > 0) model.network.latency_s = o.latency_us * 1e-6;
  if (o.gbits > 0) model.network.bytes_per_s = o.gbits * 1e9 / 8;
  std::printf(
      "# cost model: network %.1f us, %.2f GB/s a host's link; rings within a host %.1f us, %.2f GB/s\n",
      model.network.latency_s * 1e6, model.network.bytes_per_s / 1e9, model.shm_messages.latency_s * 1e6,
      model.shm_messages.bytes_per_s / 1e9);
  std::printf(
      "| collective | ranks | hosts | size a rank | algorithm | simulated (us) | model (us) | lower bound "
      "(us) | "
      "simulated / bound | messages |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (Collective c : o.collectives) {
    for (int ranks : o.ranks) {
      for (size_t bytes : o.sizes) print_row(o, model, c, ranks, bytes);
    }
  }
  return 0;
}
