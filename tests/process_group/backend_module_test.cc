// The optional backends are modules (src/process_group/backend_module.h):
// a process that links libcohort maps none of MPI's or NCCL's libraries
// until a group asks for that backend, and a module that cannot be loaded
// is named in the group's error. Run as real processes
// (backend_module_probe), since a test process's earlier groups would have
// loaded them already.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/subprocess.h"

namespace cohort::testing {
namespace {

#ifdef COHORT_TEST_HAVE_NCCL
constexpr bool kWithNcclModule = true;
#else
constexpr bool kWithNcclModule = false;
#endif

struct ProbeRun {
  std::string output;
  int exit_code = -1;
};

ProbeRun probe(const std::string& spec, const std::vector<std::string>& env = {}) {
  Subprocess child({binary_path("tests/backend_module_probe"), spec}, env);
  ProbeRun run;
  run.output = child.read_all(std::chrono::seconds(60));
  run.exit_code = child.wait();
  return run;
}

TEST(BackendModules, ACohortGroupMapsNoneOfMpisOrNcclsLibraries) {
  const ProbeRun run = probe("cohort");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("before: none\n"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("after: none\n"), std::string::npos) << run.output;
}

TEST(BackendModules, AGroupWithNcclLoadsNcclsModuleAndLibraryThenAndOnlyThen) {
  if (!kWithNcclModule) GTEST_SKIP() << "cohort is built without NCCL";
  // The NCCL communicator waits for the first CUDA buffer, so this group
  // is made (and its backend loaded) on a machine without a GPU too.
  const ProbeRun run = probe("cpu:cohort,cuda:nccl");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("before: none\n"), std::string::npos) << run.output;
  const size_t after = run.output.find("after: ");
  ASSERT_NE(after, std::string::npos) << run.output;
  const std::string loaded = run.output.substr(after);
  EXPECT_NE(loaded.find("libcohort_nccl.so"), std::string::npos) << loaded;
  EXPECT_NE(loaded.find("libnccl.so"), std::string::npos) << loaded;
  EXPECT_EQ(loaded.find("libmpi.so"), std::string::npos) << loaded;
}

TEST(BackendModules, AMissingModuleIsNamedWithWhyItCouldNotLoad) {
  if (!kWithNcclModule) GTEST_SKIP() << "cohort is built without NCCL";
  // libcohort alone in a folder of its own: the probe loads it from there
  // (LD_LIBRARY_PATH comes before the probe's RUNPATH) and looks for the
  // module beside it.
  char pattern[] = "/tmp/cohort-module-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::filesystem::path folder = pattern;
  std::filesystem::copy_file(std::filesystem::path(COHORT_BINARY_DIR) / "src" / "libcohort.so.0",
                             folder / "libcohort.so.0");
  const ProbeRun run = probe("cpu:cohort,cuda:nccl", {"LD_LIBRARY_PATH=" + folder.string()});
  std::filesystem::remove_all(folder);
  EXPECT_EQ(run.exit_code, 1) << run.output;
  const std::string expected = "backend 'nccl' is built, but its module " +
                               (folder / "libcohort_nccl.so").string() + " could not be loaded";
  EXPECT_NE(run.output.find(expected), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("No such file"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace cohort::testing
