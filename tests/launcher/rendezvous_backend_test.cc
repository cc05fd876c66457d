// The rendezvous backends against the real thing: a TcpStore this test
// hosts, and an etcd server it starts on loopback (skipped when etcd is not
// installed); then whole jobs of two launchers meeting through etcd.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <thread>

#include "cohort/errors.h"
#include "common/socket.h"
#include "launcher/dynamic_rendezvous.h"
#include "launcher/etcd_backend.h"
#include "launcher/store_backend.h"
#include "support/subprocess.h"

namespace cohort::launcher {
namespace {

using cohort::testing::binary_path;
using cohort::testing::Subprocess;
using namespace std::chrono_literals;

constexpr const char* kEtcd = "/usr/bin/etcd";

// EtcdServer is a throwaway etcd on loopback: free ports, a temporary data
// folder, killed and removed at the end.
class EtcdServer {
 public:
  EtcdServer() : dir_(::testing::TempDir() + "/etcd_" + std::to_string(getpid())) {
    std::filesystem::remove_all(dir_);
    client_port_ = free_port();
    int peer = free_port();
    const std::string client = "http://127.0.0.1:" + std::to_string(client_port_);
    const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer);
    process_ = std::make_unique<Subprocess>(std::vector<std::string>{
        kEtcd, "--name", "t", "--data-dir", dir_, "--listen-client-urls", client, "--advertise-client-urls",
        client, "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
        "--initial-cluster", "t=" + peer_url, "--logger", "zap", "--log-level", "error"});
    EtcdBackend probe(endpoint(), 2s);
    for (int i = 0; i < 200; ++i) {
      try {
        probe.get("probe");
        return;
      } catch (const Error&) {
        std::this_thread::sleep_for(50ms);
      }
    }
    throw Error("etcd did not answer on " + endpoint());
  }
  ~EtcdServer() {
    process_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }

 private:
  std::string dir_;
  int client_port_ = 0;
  std::unique_ptr<Subprocess> process_;
};

// The same checks for every backend.
void check_backend(RendezvousBackend& b) {
  EXPECT_EQ(b.get("k"), std::nullopt);
  b.set("k", "v1");
  EXPECT_EQ(b.get("k"), "v1");
  std::optional<std::string> now;
  EXPECT_FALSE(b.compare_set("k", std::string("other"), "v2", &now));
  EXPECT_EQ(now, "v1");
  EXPECT_FALSE(b.compare_set("k", std::nullopt, "v2", &now)) << "the key exists";
  EXPECT_EQ(now, "v1");
  EXPECT_TRUE(b.compare_set("k", std::string("v1"), "v2", &now));
  EXPECT_EQ(now, "v2");
  EXPECT_TRUE(b.compare_set("fresh", std::nullopt, "a|b=1,c=2", &now));
  EXPECT_EQ(b.get("fresh"), "a|b=1,c=2");
  std::string binary("x\0y\n\"z", 6);
  b.set("bin", binary);
  EXPECT_EQ(b.get("bin"), binary);
}

TEST(RendezvousBackendTest, StoreBackendKeepsTheContract) {
  bool hosting = false;
  auto b = make_store_backend("127.0.0.1:0", 5s, &hosting);
  EXPECT_TRUE(hosting);
  check_backend(*b);
}

TEST(RendezvousBackendTest, EtcdBackendKeepsTheContract) {
  if (::access(kEtcd, X_OK) != 0) GTEST_SKIP() << "etcd is not installed (apt-get install etcd-server)";
  EtcdServer etcd;
  EtcdBackend b(etcd.endpoint(), 5s);
  check_backend(b);
}

TEST(RendezvousBackendTest, UnreachableEtcdIsAnErrorNamingIt) {
  EtcdBackend b("127.0.0.1:" + std::to_string(free_port()), 1s);
  try {
    b.get("k");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1"), std::string::npos) << e.what();
  }
}

TEST(RendezvousBackendTest, TwoLaunchersMeetThroughEtcd) {
  if (::access(kEtcd, X_OK) != 0) GTEST_SKIP() << "etcd is not installed (apt-get install etcd-server)";
  EtcdServer etcd;
  auto node = [&] {
    return std::make_unique<Subprocess>(std::vector<std::string>{
        "/bin/sh", "-c",
        "exec " + binary_path("tools/cohortrun") + " --nnodes 2 --nproc-per-node 2 --rdzv-backend etcd " +
            "--rdzv-endpoint " + etcd.endpoint() + " --rdzv-id etcdjob " +
            binary_path("tests/launch_worker") + " pg 2>&1"});
  };
  auto a = node();
  auto b = node();
  std::string out = a->read_all(60s) + b->read_all(60s);
  EXPECT_EQ(a->wait(), 0) << out;
  EXPECT_EQ(b->wait(), 0) << out;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(out.find("[rank" + std::to_string(rank) + "]: ok rank " + std::to_string(rank) + " of 4"),
              std::string::npos)
        << out;
  }
  // The round lives in etcd.
  EtcdBackend b2(etcd.endpoint(), 5s);
  auto state = b2.get("rdzv/etcdjob/round/0");
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(RoundState::decode(*state).participants.size(), 2u);
  EXPECT_TRUE(RoundState::decode(*state).closed);
}

TEST(RendezvousBackendTest, RoundStateRoundTrips) {
  RoundState s;
  s.closed = true;
  s.restarts = 2;
  s.last_call_ms = 1234;
  s.participants = {{"host-a_12_ab", 4}, {"host=b_7_cd", 1}};
  RoundState t = RoundState::decode(s.encode());
  EXPECT_EQ(t.encode(), s.encode());
  EXPECT_EQ(t.index_of("host=b_7_cd"), 1);
  EXPECT_EQ(t.participants[1].second, 1);
  EXPECT_THROW(RoundState::decode("open|1"), Error);
}

}  // namespace
}  // namespace cohort::launcher
