// cohort-info: prints every COHORT_* knob with its value and where the value
// came from (default, environment or set_config), and how cohort was built.
//
//   cohort-info              a table for people
//   cohort-info --markdown   the same as a markdown table (docs/config.md)
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cohort/config.h"
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

int main(int argc, char** argv) {
  bool markdown = argc > 1 && std::strcmp(argv[1], "--markdown") == 0;
  if (argc > 1 && !markdown) {
    std::fprintf(stderr, "usage: cohort-info [--markdown]\n");
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
