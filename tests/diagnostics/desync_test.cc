// COHORT_DEBUG=detail with ranks as threads: ranks that call different
// collectives all raise DesyncError with the same report of what each rank
// called; point-to-point tags and sizes that differ are desyncs too.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <regex>
#include <thread>

#include "cohort/config.h"
#include "cohort/errors.h"
#include "process_group/collective_checks.h"
#include "process_group/thread_ranks.h"

namespace cohort::testing {
namespace {

using std::chrono::milliseconds;

class DesyncTest : public ::testing::Test {
 protected:
  void SetUp() override { set_config("COHORT_DEBUG", "detail"); }
  void TearDown() override { reset_config("COHORT_DEBUG"); }
};

// raised runs `body` on `world` thread ranks and returns what each raised:
// "DesyncError: message", "OtherClass: message", or "" when it returned.
std::vector<std::string> raised(int world, const std::function<void(ProcessGroup&)>& body) {
  std::vector<std::string> out(static_cast<size_t>(world));
  run_ranks(world, [&](ProcessGroup& g) {
    try {
      body(g);
    } catch (const DesyncError& e) {
      out[g.rank()] = std::string("DesyncError: ") + e.what();
    } catch (const TimeoutError& e) {
      out[g.rank()] = std::string("TimeoutError: ") + e.what();
    } catch (const NetworkError& e) {
      out[g.rank()] = std::string("NetworkError: ") + e.what();
    } catch (const Error& e) {
      out[g.rank()] = std::string("Error: ") + e.what();
    }
  });
  return out;
}

void expect_everyone_raised(const std::vector<std::string>& got, const std::string& report) {
  for (size_t r = 0; r < got.size(); ++r) EXPECT_EQ(got[r], "DesyncError: " + report) << "rank " << r;
}

TEST_F(DesyncTest, DifferentCollectivesAreNamedRankByRankOnEveryRank) {
  auto got = raised(3, [](ProcessGroup& g) {
    std::vector<float> v(1024, 1.0f);
    if (g.rank() == 1) {
      g.broadcast(Buffer::of(v));
    } else {
      g.all_reduce(Buffer::of(v));
    }
  });
  expect_everyone_raised(
      got,
      "collective #1 of group test: ranks differ: ranks 0,2: all_reduce(float32, 1024 elements, "
      "SUM); rank 1: broadcast(float32, 1024 elements, root 0)");
}

TEST_F(DesyncTest, DifferentDtypes) {
  auto got = raised(2, [](ProcessGroup& g) {
    std::vector<float> f(16, 1.0f);
    std::vector<int32_t> i(16, 1);
    g.all_reduce(g.rank() == 0 ? Buffer::of(f) : Buffer::of(i));
  });
  expect_everyone_raised(
      got,
      "collective #1 of group test: ranks differ: rank 0: all_reduce(float32, 16 elements, SUM); "
      "rank 1: all_reduce(int32, 16 elements, SUM)");
}

TEST_F(DesyncTest, DifferentElementCounts) {
  auto got = raised(3, [](ProcessGroup& g) {
    std::vector<float> v(g.rank() == 2 ? 1000 : 1024, 1.0f);
    g.all_reduce(Buffer::of(v));
  });
  expect_everyone_raised(
      got,
      "collective #1 of group test: ranks differ: ranks 0,1: all_reduce(float32, 1024 elements, "
      "SUM); rank 2: all_reduce(float32, 1000 elements, SUM)");
}

TEST_F(DesyncTest, DifferentRoots) {
  auto got = raised(2, [](ProcessGroup& g) {
    std::vector<int64_t> v(1, 7);
    BroadcastOptions o;
    o.src = g.rank();  // each rank believes it is the root
    g.broadcast(Buffer::of(v), o);
  });
  expect_everyone_raised(
      got,
      "collective #1 of group test: ranks differ: rank 0: broadcast(int64, 1 element, root 0); "
      "rank 1: broadcast(int64, 1 element, root 1)");
}

TEST_F(DesyncTest, DifferentReduceOps) {
  auto got = raised(2, [](ProcessGroup& g) {
    std::vector<double> v(8, 1.0);
    ReduceOptions o;
    o.dst = 1;
    o.op = g.rank() == 0 ? ReduceOp::SUM : ReduceOp::MAX;
    g.reduce(Buffer::of(v), o);
  });
  expect_everyone_raised(
      got,
      "collective #1 of group test: ranks differ: rank 0: reduce(float64, 8 elements, root 1, "
      "SUM); rank 1: reduce(float64, 8 elements, root 1, MAX)");
}

TEST_F(DesyncTest, ARankThatSkippedACollectiveShowsItsNextOneUnderTheSameNumber) {
  auto got = raised(3, [](ProcessGroup& g) {
    std::vector<float> v(4, 1.0f);
    g.all_reduce(Buffer::of(v));                     // #1: everyone
    if (g.rank() != 1) g.all_reduce(Buffer::of(v));  // #2: rank 1 skips it
    g.barrier();
  });
  expect_everyone_raised(
      got,
      "collective #2 of group test: ranks differ: ranks 0,2: all_reduce(float32, 4 elements, "
      "SUM); rank 1: barrier()");
}

TEST_F(DesyncTest, ARankThatCalledAnExtraCollectiveLearnsWhichRankNeverCalledOne) {
  std::atomic<int> done{0};
  auto got = raised(3, [&](ProcessGroup& g) {
    std::vector<float> v(4, 1.0f);
    g.all_reduce(Buffer::of(v));  // #1: everyone
    if (g.rank() == 2) {
      // Called nothing more, but stays (a rank that leaves is a NetworkError).
      while (done.load() < 2) std::this_thread::sleep_for(milliseconds(5));
      return;
    }
    AllReduceOptions o;
    o.timeout = milliseconds(500);
    try {
      g.all_reduce(Buffer::of(v), o);  // #2: ranks 0 and 1 only
    } catch (...) {
      ++done;
      throw;
    }
    ++done;
  });
  const std::string report =
      "DesyncError: collective #2 of group test: ranks differ: ranks 0,1: all_reduce(float32, 4 elements, "
      "SUM); "
      "rank 2: no collective #2 before the timeout (its last was #1: all_reduce(float32, 4 elements, SUM))";
  EXPECT_EQ(got[0], report);
  EXPECT_EQ(got[1], report);
  EXPECT_EQ(got[2], "");
}

TEST_F(DesyncTest, TheFirstCollectiveMissingSaysThereWasNoneBefore) {
  std::atomic<bool> done{false};
  auto got = raised(2, [&](ProcessGroup& g) {
    if (g.rank() == 1) {
      while (!done.load()) std::this_thread::sleep_for(milliseconds(5));
      return;
    }
    BarrierOptions o;
    o.timeout = milliseconds(300);
    try {
      g.barrier(o);
    } catch (...) {
      done = true;
      throw;
    }
    done = true;
  });
  EXPECT_EQ(
      got[0],
      "DesyncError: collective #1 of group test: ranks differ: rank 0: barrier(); rank 1: no collective #1 "
      "before the timeout (no collective before)");
  EXPECT_EQ(got[1], "");
}

TEST_F(DesyncTest, AsyncCollectivesAreCheckedInCallOrderAndTheGroupIsBrokenAfter) {
  auto got = raised(2, [](ProcessGroup& g) {
    std::vector<float> a(8, 1.0f), b(8, 1.0f);
    AllReduceOptions o;
    o.async_op = true;
    auto first = g.all_reduce(Buffer::of(a), o);
    // Rank 1 gives its second all_reduce fewer elements.
    auto second = g.all_reduce(Buffer::of(b.data(), g.rank() == 0 ? 8 : 6), o);
    first->wait();
    try {
      second->wait();
    } catch (const DesyncError& e) {
      // Later calls fail at once, saying why.
      try {
        g.barrier();
        ADD_FAILURE() << "a broken group ran a barrier";
      } catch (const DesyncError& later) {
        EXPECT_NE(std::string(later.what())
                      .find("group test can no longer be used because all_reduce #2 of "
                            "group test failed (create a new group): collective #2"),
                  std::string::npos)
            << later.what();
      }
      throw;
    }
  });
  expect_everyone_raised(
      got,
      "collective #2 of group test: ranks differ: rank 0: all_reduce(float32, 8 elements, SUM); "
      "rank 1: all_reduce(float32, 6 elements, SUM)");
}

TEST_F(DesyncTest, UnevenCallsThatAgreeRunAndUnevenOnesThatDoNotAreReported) {
  auto got = raised(3, [](ProcessGroup& g) {
    // Agreeing: rank q contributes q + 1 elements.
    std::vector<float> in(static_cast<size_t>(g.rank()) + 1, 1.0f), out(6);
    std::vector<Buffer> outs = {Buffer::of(out.data(), 1), Buffer::of(out.data() + 1, 2),
                                Buffer::of(out.data() + 3, 3)};
    g.all_gather(outs, Buffer::of(in));
    // Rank 0 expects two elements from rank 2, which gives three.
    if (g.rank() == 0)
      outs = {Buffer::of(out.data(), 1), Buffer::of(out.data() + 1, 2), Buffer::of(out.data() + 3, 2)};
    g.all_gather(outs, Buffer::of(in));
  });
  expect_everyone_raised(
      got,
      "collective #2 of group test: ranks differ: rank 0: all_gather(float32, 1 element, 5 in "
      "all); rank 1: all_gather(float32, 2 elements, 6 in all); rank 2: all_gather(float32, 3 "
      "elements, 6 in all)");
}

TEST_F(DesyncTest, EveryCollectiveOfTheMatrixPassesTheCheckWhenRanksAgree) {
  // No false alarms: the whole collective matrix, fingerprinted.
  run_ranks(3, [](ProcessGroup& g) {
    for (const CollectiveCheck& check : collective_checks()) check.run(g);
  });
}

// Point to point: the tag or size one rank sends differs from what the
// other receives.

const std::regex& unmatched_tag_report() {
  static const std::regex re(
      "DesyncError: recv from 0 tag 4 \\(p2p #1\\) of group test: rank 0 \\([^)]+\\) sent a message with tag "
      "3 "
      "\\(16 bytes\\) that no receive matched; this rank waited for tag 4 \\(16 bytes\\)");
  return re;
}

TEST_F(DesyncTest, ARecvThatTimesOutWhileAMessageWithAnotherTagWaitsNamesBothTags) {
  std::atomic<bool> done{false};
  auto got = raised(2, [&](ProcessGroup& g) {
    std::vector<int32_t> v(4, 1);
    if (g.rank() == 0) {
      P2POptions o;
      o.tag = 3;
      g.send(Buffer::of(v), 1, o);
      while (!done.load()) std::this_thread::sleep_for(milliseconds(5));
      g.barrier();  // hears rank 1's failure
      return;
    }
    P2POptions o;
    o.tag = 4;
    o.timeout = milliseconds(300);
    try {
      g.recv(Buffer::of(v), 0, o);
    } catch (...) {
      done = true;
      throw;
    }
  });
  EXPECT_TRUE(std::regex_match(got[1], unmatched_tag_report())) << got[1];
  // Rank 0's next call fails with rank 1's reason.
  EXPECT_EQ(got[0].rfind("DesyncError: ", 0), 0u) << got[0];
  EXPECT_NE(got[0].find("(reported by rank 1)"), std::string::npos) << got[0];
}

TEST_F(DesyncTest, ARecvWhosePeerLeftAfterSendingAnotherTagNamesBothTags) {
  auto got = raised(2, [&](ProcessGroup& g) {
    std::vector<int32_t> v(4, 1);
    P2POptions o;
    o.tag = g.rank() == 0 ? 3 : 4;
    if (g.rank() == 0) {
      g.send(Buffer::of(v), 1, o);
      return;  // leaves: its connection closes
    }
    g.recv(Buffer::of(v), 0, o);
  });
  EXPECT_EQ(got[0], "");
  EXPECT_TRUE(std::regex_match(got[1], unmatched_tag_report())) << got[1];
}

TEST_F(DesyncTest, PointToPointSizesThatDifferAreADesyncNamingBoth) {
  std::atomic<bool> done{false};
  auto got = raised(2, [&](ProcessGroup& g) {
    std::vector<int32_t> v(g.rank() == 0 ? 5 : 4, 1);
    if (g.rank() == 0) {
      g.send(Buffer::of(v), 1);
      while (!done.load()) std::this_thread::sleep_for(milliseconds(5));
      return;
    }
    try {
      g.recv(Buffer::of(v), 0);
    } catch (...) {
      done = true;
      throw;
    }
  });
  EXPECT_EQ(got[0], "");
  static const std::regex re(
      "DesyncError: rank 0 \\([^)]+\\) sent 20 bytes but this rank expected 16 in recv from 0 tag 0 \\(p2p "
      "#1\\) "
      "of group test \\(point-to-point tag 0\\): sizes differ between ranks");
  EXPECT_TRUE(std::regex_match(got[1], re)) << got[1];
}

}  // namespace
}  // namespace cohort::testing
