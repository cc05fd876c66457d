// COHORT_TCP_CONNECT=lazy: pairs on different hosts connect on their
// first message; a host's ranks share memory with no connection. The
// collectives must not notice, and two ranks whose first messages cross
// must end with one working connection. Ranks are threads, so one host:
// COHORT_SHM_RANKS_PER_HOST makes pretend hosts, COHORT_SHM=off a host per
// rank.
#include <gtest/gtest.h>

#include "cohort/config.h"
#include "process_group/thread_ranks.h"

namespace cohort::testing {
namespace {

class LazyConnect : public ::testing::Test {
 protected:
  void SetUp() override { set_config("COHORT_TCP_CONNECT", "lazy"); }
  void TearDown() override {
    reset_config("COHORT_TCP_CONNECT");
    reset_config("COHORT_SHM_RANKS_PER_HOST");
    reset_config("COHORT_SHM");
  }
};

TEST_F(LazyConnect, CollectivesAndPointToPointWorkUnchanged) {
  // Hosts {0, 1}, {2, 3} and {4}: rings within, lazy TCP between.
  set_config("COHORT_SHM_RANKS_PER_HOST", "2");
  run_ranks(5, [](ProcessGroup& g) {
    for (size_t n : {size_t{1}, size_t{5000}, size_t{300001}}) {
      std::vector<int32_t> v(n, g.rank() + 1);
      g.all_reduce(Buffer::of(v));
      ASSERT_EQ(v[n - 1], 15);
    }
    std::vector<float> b(1000, g.rank() == 3 ? 7.0f : 0.0f);
    BroadcastOptions o;
    o.src = 3;
    g.broadcast(Buffer::of(b), o);
    ASSERT_EQ(b[999], 7.0f);
    // The highest rank talks to the lowest first.
    int32_t x = g.rank();
    if (g.rank() == 4) g.send(Buffer::of(&x, 1), 0);
    if (g.rank() == 0) {
      g.recv(Buffer::of(&x, 1), 4);
      ASSERT_EQ(x, 4);
    }
    g.barrier();
  });
}

TEST_F(LazyConnect, FirstMessagesThatCrossEndWithOneConnection) {
  set_config("COHORT_SHM", "off");  // the two must connect over TCP
  for (int round = 0; round < 20; ++round) {
    run_ranks(2, [](ProcessGroup& g) {
      const int other = 1 - g.rank();
      std::vector<int64_t> out(100000, g.rank()), in(100000, -1);
      // Both send first, at the same moment: both start a connection.
      auto s = g.isend(Buffer::of(out), other, 1);
      g.recv(Buffer::of(in), other, [] {
        P2POptions o;
        o.tag = 1;
        return o;
      }());
      s->wait();
      ASSERT_EQ(in[99999], other);
      std::vector<double> v(64, 1.0);
      g.all_reduce(Buffer::of(v));
      ASSERT_EQ(v[0], 2.0);
    });
  }
}

}  // namespace
}  // namespace cohort::testing
