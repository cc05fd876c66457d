// SubTransport forwards every member of Transport to its parent, with ranks
// translated both ways. The parent here records what reaches it; it
// overrides every virtual of Transport (`final`, so a new pure virtual
// fails to compile here, and each test below names one member).
#include "algorithms/sub_transport.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cohort {
namespace {

// Six ranks on hosts {0,1,2} and {3,4,5}; the view holds ranks 1, 3, 4, 5.
class ForwardingProbe final : public Transport {
 public:
  int rank() const override { return 4; }
  int size() const override { return 6; }
  Status exchange(SendRequest* sends, size_t num_sends, RecvRequest* recvs, size_t num_recvs, Deadline,
                  const std::string& what) override {
    for (size_t i = 0; i < num_sends; ++i) send_peers.push_back(sends[i].peer);
    for (size_t i = 0; i < num_recvs; ++i) {
      recv_peers.push_back(recvs[i].peer);
      recvs[i].source = recvs[i].peer;
    }
    whats.push_back(what);
    return Status::ok_status();
  }
  void post_send(const SendRequest& send, Deadline, const std::string*, Completion done) override {
    send_peers.push_back(send.peer);
    done(Status::ok_status(), send.peer);
  }
  void post_recv(const RecvRequest& recv, Deadline, const std::string*, Completion done) override {
    recv_peers.push_back(recv.peer);
    done(Status::ok_status(), recv.peer);
  }
  bool has_pending() const override { return pending; }
  void progress(Deadline) override { ++progressed; }
  void wake() override { ++woken; }
  void interrupt(const Status& reason) override { interrupted = reason.message(); }
  std::string peer_name(int peer) const override { return "rank " + std::to_string(peer); }
  int host_of(int rank) const override { return rank < 3 ? 0 : 3; }
  double ranks_per_cpu() const override { return 3.5; }
  Status poll_health() override { return Status(StatusCode::kNetworkError, "health of the parent"); }
  bool peer_gone(int peer) const override { return peer == 5; }
  std::vector<int> lost_peers() const override { return {0, 3, 5}; }
  void pace_by_share(const std::vector<size_t>& bytes_to) override { paced = bytes_to; }

  std::vector<int> send_peers, recv_peers;
  std::vector<std::string> whats;
  bool pending = true;
  int progressed = 0, woken = 0;
  std::string interrupted;
  std::vector<size_t> paced{99};
};

struct SubTransportForwarding : ::testing::Test {
  ForwardingProbe parent;
  SubTransport view{parent, {1, 3, 4, 5}};
};

TEST_F(SubTransportForwarding, RanksAreTheMembersRenumbered) {
  EXPECT_EQ(view.rank(), 2);
  EXPECT_EQ(view.size(), 4);
  EXPECT_EQ(view.peer_name(1), "rank 3");
}

TEST_F(SubTransportForwarding, ExchangeAndPostedRequestsReachTheParentsRanksAndComeBackRenumbered) {
  char byte = 0;
  SendRequest send{0, MessageKind::kCollective, 7, &byte, 1};
  RecvRequest recv{3, MessageKind::kCollective, 7, &byte, 1};
  ASSERT_TRUE(view.exchange(&send, 1, &recv, 1, Deadline::never(), "all_reduce #1").ok());
  EXPECT_EQ(recv.source, 3);
  int posted_source = -2;
  view.post_send(SendRequest{1, MessageKind::kPointToPoint, 1, &byte, 1}, Deadline::never(), nullptr,
                 [](const Status&, int) {});
  view.post_recv(RecvRequest{3, MessageKind::kPointToPoint, 1, &byte, 1}, Deadline::never(), nullptr,
                 [&](const Status&, int source) { posted_source = source; });
  EXPECT_EQ(parent.send_peers, (std::vector<int>{1, 3}));
  EXPECT_EQ(parent.recv_peers, (std::vector<int>{5, 5}));
  EXPECT_EQ(posted_source, 3);
  EXPECT_EQ(parent.whats, (std::vector<std::string>{"all_reduce #1"}));
}

TEST_F(SubTransportForwarding, TheLoopsControlsGoToTheParent) {
  EXPECT_TRUE(view.has_pending());
  parent.pending = false;
  EXPECT_FALSE(view.has_pending());
  view.progress(Deadline::never());
  view.wake();
  view.interrupt(Status(StatusCode::kBackendError, "stop"));
  EXPECT_EQ(parent.progressed, 1);
  EXPECT_EQ(parent.woken, 1);
  EXPECT_EQ(parent.interrupted, "stop");
  EXPECT_EQ(view.poll_health().message(), "health of the parent");
}

TEST_F(SubTransportForwarding, HostsAreNamedByTheirLowestMember) {
  // Parent hosts 0 ({0,1,2}) and 3 ({3,4,5}); members 1 | 3, 4, 5.
  EXPECT_EQ(view.host_of(0), 0);
  EXPECT_EQ(view.host_of(1), 1);
  EXPECT_EQ(view.host_of(2), 1);
  EXPECT_EQ(view.host_of(3), 1);
}

TEST_F(SubTransportForwarding, TheMachinesCrowdingIsTheParents) {
  EXPECT_EQ(view.ranks_per_cpu(), 3.5);
}

TEST_F(SubTransportForwarding, LostAndGonePeersAreTheMembersOnes) {
  EXPECT_EQ(view.lost_peers(), (std::vector<int>{1, 3}));  // parent's 3 and 5; its 0 is no member
  EXPECT_TRUE(view.peer_gone(3));
  EXPECT_FALSE(view.peer_gone(2));
}

TEST_F(SubTransportForwarding, PacingSharesGoToTheParentsRanksAndAnEmptyOneLiftsIt) {
  view.pace_by_share({10, 20, 30, 40});
  EXPECT_EQ(parent.paced, (std::vector<size_t>{0, 10, 0, 20, 30, 40}));
  view.pace_by_share({});
  EXPECT_TRUE(parent.paced.empty());
}

}  // namespace
}  // namespace cohort
