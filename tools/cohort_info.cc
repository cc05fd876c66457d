// cohort-info: prints every COHORT_* knob with its value and where the value
// came from (default, environment or set_config), and how cohort was built.
//
//   cohort-info              a table for people
//   cohort-info --markdown   the same as a markdown table (docs/config.md)
//   cohort-info --algorithms --ranks P [--hosts H] [--ranks-per-cpu R]
//                            the algorithm table in force for P ranks on H
//                            hosts (default: P, none sharing memory; H=1:
//                            one host), their machines running R ranks a
//                            CPU (default COHORT_COST_RANKS_PER_CPU, else
//                            1), with COHORT_ALGO and the cost model's
//                            knobs applied
//   cohort-info --algorithms --ranks P [--hosts H] --predict 4,64K,16M
//                            the cost model's predicted time of the table's
//                            choice at those sizes beside its lower bound
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "algorithms/selection.h"
#include "cohort/config.h"
#include "common/config_registry.h"
#include "common/split.h"

namespace {

void print_table(const std::vector<cohort::ConfigEntry>& entries) {
  std::printf("cohort %s (torch layer: %s, MPI: %s, NCCL: %s)\n\n", COHORT_VERSION_TEXT, COHORT_BUILT_TORCH,
              COHORT_BUILT_MPI, COHORT_BUILT_NCCL);
  for (const auto& e : entries) {
    std::printf("%s=%s\n    source: %s; default: %s; type: %s%s%s\n    %s\n\n", e.name.c_str(),
                e.value.c_str(), e.source.c_str(),
                e.default_value.empty() ? "(empty)" : e.default_value.c_str(), e.type.c_str(),
                e.torch_names.empty() ? "" : "; torch's: ", e.torch_names.c_str(), e.doc.c_str());
  }
}

void print_markdown(const std::vector<cohort::ConfigEntry>& entries) {
  std::printf(
      "| knob | type | default | meaning | torch's variable, read when the knob is unset |\n"
      "|---|---|---|---|---|\n");
  for (const auto& e : entries) {
    std::string torch;
    if (!e.torch_names.empty()) {
      for (const std::string& name : cohort::split(e.torch_names, '|'))
        torch += (torch.empty() ? "`" : ", `") + name + "`";
    }
    std::printf("| `%s` | %s | `%s` | %s | %s |\n", e.name.c_str(), e.type.c_str(), e.default_value.c_str(),
                e.doc.c_str(), torch.c_str());
  }
}

}  // namespace

// print_algorithms: `--algorithms --ranks P [--hosts H]`; returns the exit code.
int print_algorithms(int argc, char** argv) {
  long ranks = 0, hosts = 0;
  double crowd = cohort::config_float(cohort::knobs::kCostRanksPerCpu);
  std::vector<size_t> predict;
  for (int k = 2; k < argc; ++k) {
    const bool has_value = k + 1 < argc;
    char* end = nullptr;
    if (std::strcmp(argv[k], "--ranks") == 0 && has_value) {
      ranks = std::strtol(argv[++k], &end, 10);
    } else if (std::strcmp(argv[k], "--hosts") == 0 && has_value) {
      hosts = std::strtol(argv[++k], &end, 10);
    } else if (std::strcmp(argv[k], "--ranks-per-cpu") == 0 && has_value) {
      crowd = std::strtod(argv[++k], &end);
      if (end && *end == '\0' && !(crowd >= 1 && crowd <= 100000)) {
        std::fprintf(stderr, "cohort-info --algorithms: --ranks-per-cpu %s is not from 1 to 100000\n",
                     argv[k]);
        return 2;
      }
    } else if (std::strcmp(argv[k], "--predict") == 0 && has_value) {
      for (const std::string& item : cohort::split(argv[++k], ',')) {
        size_t bytes = 0;
        if (!cohort::parse_size(item, &bytes)) {
          std::fprintf(stderr, "cohort-info --algorithms: --predict '%s' is not a size (e.g. 4,64K,16M)\n",
                       item.c_str());
          return 2;
        }
        predict.push_back(bytes);
      }
      continue;
    } else {
      std::fprintf(stderr, "cohort-info --algorithms: unknown argument '%s'\n", argv[k]);
      return 2;
    }
    if (!end || *end != '\0') {
      std::fprintf(stderr, "cohort-info --algorithms: '%s' is not a number\n", argv[k]);
      return 2;
    }
  }
  if (ranks < 1 || ranks > (1 << 24) || hosts < 0 || hosts > ranks) {
    std::fprintf(stderr,
                 "cohort-info --algorithms: needs --ranks P (1 to 16M) and at most P hosts (got --ranks %ld "
                 "--hosts %ld)\n",
                 ranks, hosts);
    return 2;
  }
  const int p = static_cast<int>(ranks);
  cohort::GroupShape shape = cohort::GroupShape::of(p, hosts == 0 ? p : static_cast<int>(hosts));
  shape.ranks_per_cpu = std::max(1.0, crowd);
  if (!predict.empty()) {
    std::printf("# %s: the cost model's time for the table's choice, and its lower bound\n",
                shape.describe().c_str());
    std::fputs(cohort::AlgorithmTable::for_config(shape).predictions(predict).c_str(), stdout);
    return 0;
  }
  std::fputs(cohort::AlgorithmTable::for_config(shape).describe().c_str(), stdout);
  if (shape.topology == cohort::Topology::kHosts) {
    std::printf("\n# between hosts: the leaders' step of a hierarchical all_reduce\n");
    std::fputs(cohort::AlgorithmTable::for_config(shape.leaders(), true).describe().c_str(), stdout);
    std::printf(
        "\n# between hosts: each column's step of a hierarchical all_gather and reduce_scatter (%d columns a "
        "host's link)\n",
        shape.most_per_host);
    std::fputs(cohort::AlgorithmTable::for_config(shape.columns(), true).describe().c_str(), stdout);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--algorithms") == 0) {
    try {
      return print_algorithms(argc, argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "cohort-info: %s\n", e.what());
      return 1;
    }
  }
  bool markdown = argc > 1 && std::strcmp(argv[1], "--markdown") == 0;
  if (argc > 1 && !markdown) {
    std::fprintf(stderr,
                 "usage: cohort-info [--markdown | --algorithms --ranks P [--hosts H] [--ranks-per-cpu R] "
                 "[--predict SIZES]]\n");
    return 2;
  }
  try {
    auto entries = cohort::config_entries();
    markdown ? print_markdown(entries) : print_table(entries);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cohort-info: %s\n", e.what());
    return 1;
  }
  return 0;
}
