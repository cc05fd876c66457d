// The kinds of link are tried in order for each peer (link_kinds.h): the
// peers of a (pretend) host get shared memory, the others TCP, eager or
// lazy, and bytes move over both. Ranks are threads over real sockets and
// a real arena.
#include <gtest/gtest.h>

#include <thread>

#include "cohort/config.h"
#include "cohort/hash_store.h"
#include "transport/connect_group.h"
#include "transport/engine.h"

namespace cohort {
namespace {

Deadline soon() {
  return Deadline::after(std::chrono::seconds(30));
}

struct RankOutcome {
  std::vector<std::string> kinds;
  int from_host_peer = -1;   // what rank 1 sent rank 0
  int from_other_host = -1;  // what rank 2 sent rank 0
  std::string error;
};

// run_group connects 4 ranks as threads and has ranks 1 and 2 send rank 0
// an int each over the engine.
std::vector<RankOutcome> run_group() {
  HashStore store;
  const std::vector<int> ranks{0, 1, 2, 3};
  std::vector<RankOutcome> out(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      RankOutcome& o = out[static_cast<size_t>(r)];
      auto links = connect_links(store, r, ranks, "127.0.0.1", soon(), true, true);
      if (!links.ok()) {
        o.error = links.status().message();
        return;
      }
      o.kinds = links.value().kinds.of_peer;
      ConnectedLinks& l = links.value();
      auto arena = l.arena;  // outlives the engine's links
      Engine engine(r, 4, std::move(l.links), std::move(l.acceptor), std::move(l.options));
      int mine = 100 + r;
      Status st = Status::ok_status();
      if (r == 1 || r == 2) {
        SendRequest send{0, MessageKind::kPointToPoint, 7, &mine, sizeof mine};
        st = engine.exchange(&send, 1, nullptr, 0, soon(), "send to rank 0");
      } else if (r == 0) {
        RecvRequest recvs[2] = {{1, MessageKind::kPointToPoint, 7, &o.from_host_peer, sizeof(int)},
                                {2, MessageKind::kPointToPoint, 7, &o.from_other_host, sizeof(int)}};
        st = engine.exchange(nullptr, 0, recvs, 2, soon(), "recv from ranks 1 and 2");
      }
      if (!st.ok()) o.error = st.message();
      // Nobody leaves before everyone is done: a closed peer fails the rest.
      int token = 0;
      if (r == 0) {
        SendRequest sends[3] = {{1, MessageKind::kPointToPoint, 8, &token, sizeof token},
                                {2, MessageKind::kPointToPoint, 8, &token, sizeof token},
                                {3, MessageKind::kPointToPoint, 8, &token, sizeof token}};
        st = engine.exchange(sends, 3, nullptr, 0, soon(), "release");
      } else {
        RecvRequest recv{0, MessageKind::kPointToPoint, 8, &token, sizeof token};
        st = engine.exchange(nullptr, 0, &recv, 1, soon(), "release");
      }
      if (!st.ok() && o.error.empty()) o.error = st.message();
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

class LinkKinds : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    set_config("COHORT_SHM_RANKS_PER_HOST", "2");
    set_config("COHORT_TCP_CONNECT", GetParam());
  }
  void TearDown() override {
    reset_config("COHORT_SHM_RANKS_PER_HOST");
    reset_config("COHORT_TCP_CONNECT");
    reset_config("COHORT_SHM");
  }
};

TEST_P(LinkKinds, EachPeerTakesTheFirstKindThatReachesIt) {
  const auto out = run_group();
  for (const RankOutcome& o : out) ASSERT_EQ(o.error, "");
  const std::vector<std::string> zero{"", "shared memory", "TCP", "TCP"};
  const std::vector<std::string> three{"TCP", "TCP", "shared memory", ""};
  EXPECT_EQ(out[0].kinds, zero);
  EXPECT_EQ(out[3].kinds, three);
  EXPECT_EQ(out[0].from_host_peer, 101);
  EXPECT_EQ(out[0].from_other_host, 102);
}

TEST_P(LinkKinds, WithoutSharedMemoryTcpReachesEveryone) {
  set_config("COHORT_SHM", "off");
  const auto out = run_group();
  for (const RankOutcome& o : out) ASSERT_EQ(o.error, "");
  const std::vector<std::string> one{"TCP", "", "TCP", "TCP"};
  EXPECT_EQ(out[1].kinds, one);
  EXPECT_EQ(out[0].from_host_peer, 101);
  EXPECT_EQ(out[0].from_other_host, 102);
}

INSTANTIATE_TEST_SUITE_P(EagerAndLazy, LinkKinds, ::testing::Values("eager", "lazy"));

}  // namespace
}  // namespace cohort
