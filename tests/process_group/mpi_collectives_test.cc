// The collective matrix against the MPI backend: every rank of an mpirun
// job runs this program, which joins with init_process_group("mpi") and
// runs the same checks as the ranks-as-threads matrix
// (collective_checks.cc), in the same order on every rank. With
// --backend=cohort it instead joins the native backend through env://
// (rank and size from Open MPI's OMPI_COMM_WORLD_* variables); with
// --backend=cpu:mpi,cuda:nccl it runs through the per-device dispatch
// (rank and size from MPI, the store from env:// for NCCL's bootstrap).
//
//   mpirun -np 3 mpi_collectives_test [--backend=mpi|cohort] [gtest flags]
//
// Started by tests/process_group/mpi_test.sh, which ctest runs for
// 1, 2, 3 and 4 ranks.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <thread>

#include "cohort/config.h"
#include "cohort/distributed.h"
#include "cohort/errors.h"
#include "process_group/collective_checks.h"

namespace cohort::testing {
namespace {

std::string g_backend = "mpi";

class MpiMatrix : public ::testing::TestWithParam<size_t> {};

TEST_P(MpiMatrix, Check) {
  const CollectiveCheck& check = collective_checks()[GetParam()];
  auto group = default_group();
  if (group->size() < check.min_world) GTEST_SKIP() << check.name << " needs " << check.min_world << " ranks";
  EXPECT_EQ(group->backend_name(), g_backend);
  check.run(*group);
}

std::string check_name(const ::testing::TestParamInfo<size_t>& param) {
  return collective_checks()[param.param].name;
}

INSTANTIATE_TEST_SUITE_P(Backend, MpiMatrix, ::testing::Range(size_t{0}, collective_checks().size()),
                         check_name);

TEST(MpiGroups, NewGroupSortsReversedRanksAndNonMembersGetAHandleThatIsNotAMember) {
  const int world = get_world_size(), me = get_rank();
  // Every rank but the last, in reverse order.
  std::vector<int> ranks;
  for (int r = world - 2; r >= 0; --r) ranks.push_back(r);
  if (ranks.empty()) ranks.push_back(0);
  auto group = new_group(ranks);
  const bool member = std::find(ranks.begin(), ranks.end(), me) != ranks.end();
  ASSERT_NE(group, nullptr);
  ASSERT_EQ(group->is_member(), member);
  // As torch: group rank i is the i-th smallest global rank.
  EXPECT_EQ(get_process_group_ranks(group), std::vector<int>(ranks.rbegin(), ranks.rend()));
  if (!member) {
    EXPECT_EQ(get_rank(group), -1);
    EXPECT_EQ(get_world_size(group), -1);
  }
  if (member) {
    EXPECT_EQ(group->size(), static_cast<int>(ranks.size()));
    EXPECT_EQ(group->rank(), me);
    EXPECT_EQ(get_global_rank(group, group->rank()), me);
    std::vector<int64_t> v(1001, me + 1);
    group->all_reduce(Buffer::of(v));
    int64_t want = 0;
    for (int r : ranks) want += r + 1;
    EXPECT_EQ(v[1000], want);
    // Group rank 0 is global rank 0 (the smallest), although listed last.
    std::vector<int32_t> b(5, group->rank() == 0 ? 42 : -1);
    group->broadcast(Buffer::of(b));
    EXPECT_EQ(b[4], 42);
  }
  barrier();
}

TEST(MpiTimeouts, ARecvNobodySendsTimesOut) {
  if (get_world_size() < 2) GTEST_SKIP() << "needs two ranks";
  auto group = new_group();
  if (group->rank() == 0) {
    int32_t v = 0;
    P2POptions o;
    o.tag = 99;
    o.timeout = std::chrono::milliseconds(200);
    EXPECT_THROW(group->recv(Buffer::of(&v, 1), 1, o), TimeoutError);
  }
  barrier();
}

TEST(MpiTimeouts, APolledCollectiveSomeRankIsLateForTimesOutAndBreaksTheGroup) {
  if (get_world_size() < 2) GTEST_SKIP() << "needs two ranks";
  set_config("COHORT_MPI_WAIT", "poll");  // read when the group is made
  auto group = new_group();
  reset_config("COHORT_MPI_WAIT");
  std::vector<float> v(100, 1.0f);
  if (group->rank() == 0) {
    // The others only join after the barrier below, which waits for us.
    AllReduceOptions o;
    o.timeout = std::chrono::milliseconds(300);
    try {
      group->all_reduce(Buffer::of(v), o);
      ADD_FAILURE() << "all_reduce returned although the other ranks had not joined";
    } catch (const TimeoutError& e) {
      EXPECT_NE(std::string(e.what()).find("MPI_Allreduce (non-blocking)"), std::string::npos) << e.what();
    }
    EXPECT_THROW(group->barrier(), Error) << "the group is broken after a timeout";
    barrier();
  } else {
    barrier();
    group->all_reduce(Buffer::of(v));  // matches rank 0's abandoned request
  }
  barrier();
}

// ranks_but_one writes the ranks of 0..world-1 other than `skip` as the
// desync report does ("rank 0", "ranks 0,2,3"; up to four ranks).
std::string ranks_but_one(int world, int skip) {
  std::string list;
  for (int r = 0; r < world; ++r) {
    if (r != skip) list += (list.empty() ? "" : ",") + std::to_string(r);
  }
  return (world == 2 ? "rank " : "ranks ") + list;
}

TEST(MpiDesync, DetailDebugNamesWhatEachRankCalled) {
  const int world = get_world_size();
  if (world < 2 || world > 4) GTEST_SKIP() << "written for two to four ranks";
  set_config("COHORT_DEBUG", "detail");  // read when the group is made
  auto group = new_group();
  reset_config("COHORT_DEBUG");
  std::vector<float> v(group->rank() == 1 ? 7 : 8, 1.0f);
  try {
    group->all_reduce(Buffer::of(v));
    ADD_FAILURE() << "all_reduce ran although rank 1 gave 7 elements and the others 8";
  } catch (const DesyncError& e) {
    EXPECT_EQ(std::string(e.what()),
              "collective #1 of group " + group->name() + ": ranks differ: " + ranks_but_one(world, 1) +
                  ": all_reduce(float32, 8 elements, SUM); rank 1: all_reduce(float32, 7 "
                  "elements, SUM)");
  }
  barrier();
}

TEST(MpiDesync, DetailDebugNamesTheRanksThatNeverCalledTheCollective) {
  const int world = get_world_size();
  if (world < 2 || world > 4) GTEST_SKIP() << "written for two to four ranks";
  set_config("COHORT_DEBUG", "detail");
  auto group = new_group();
  reset_config("COHORT_DEBUG");
  std::vector<float> v(8, 1.0f);
  group->all_reduce(Buffer::of(v));  // #1: everyone
  if (group->rank() == 0) {
    AllReduceOptions o;
    o.timeout = std::chrono::milliseconds(300);
    try {
      group->all_reduce(Buffer::of(v), o);  // #2: rank 0 alone
      ADD_FAILURE() << "all_reduce ran on rank 0 alone";
    } catch (const DesyncError& e) {
      const std::string others = world == 2 ? "rank 1" : world == 3 ? "ranks 1,2" : "ranks 1-3";
      EXPECT_EQ(std::string(e.what()), "collective #2 of group " + group->name() +
                                           ": ranks differ: rank 0: all_reduce(float32, 8 elements, SUM); " +
                                           others + ": no collective #2 before the timeout (" +
                                           (world == 2 ? "its" : "their") +
                                           " last was #1: all_reduce(float32, 8 elements, SUM))");
    }
  }
  barrier();
}

}  // namespace
}  // namespace cohort::testing

// late_rank_demo: rank 0 enters a blocking all_reduce with a short
// timeout that the others never join; the watchdog must end the job
// (COHORT_MPI_WAIT=block) instead of letting it hang. ctest checks the log.
int late_rank_demo() {
  std::vector<float> v(10, 1.0f);
  if (cohort::get_rank() == 0) {
    cohort::AllReduceOptions o;
    o.timeout = std::chrono::milliseconds(500);
    cohort::all_reduce(cohort::Buffer::of(v), o);
    std::fprintf(stderr, "late_rank_demo: all_reduce returned, the watchdog did not fire\n");
    return 0;
  }
  std::this_thread::sleep_for(std::chrono::seconds(60));  // mpirun ends us once rank 0 aborts
  return 0;
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  bool demo = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--backend=", 10) == 0) cohort::testing::g_backend = argv[i] + 10;
    if (std::strcmp(argv[i], "--late-rank-demo") == 0) demo = true;
  }
  cohort::InitOptions init;
  init.backend = cohort::testing::g_backend;
  init.timeout = std::chrono::seconds(60);
  cohort::init_process_group(init);
  if (demo) return late_rank_demo();
  if (cohort::get_rank() != 0) ::testing::GTEST_FLAG(brief) = true;  // one rank tells the story
  const std::string& b = cohort::testing::g_backend;
  if (b != "mpi" && b.rfind("cpu:mpi", 0) != 0) {
    // The MPI-only tests need the mpi backend's groups and timeouts.
    ::testing::GTEST_FLAG(filter) = "Backend/MpiMatrix.*";
  }
  int rc = RUN_ALL_TESTS();
  cohort::destroy_process_group();
  return rc;
}
