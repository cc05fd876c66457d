// Init URLs: parsing, errors that name the culprit, and each scheme
// reaching a working store.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <thread>

#include "cohort/errors.h"
#include "cohort/tcp_store.h"
#include "cohort/tcp_store_server.h"
#include "common/socket.h"
#include "rendezvous/init_url.h"
#include "support/messages.h"
#include "support/ports.h"

namespace cohort {
namespace {

using testing::free_port;

using testing::message_of;

TEST(InitUrlTest, ParsesTcpWithIpv4Ipv6AndQuery) {
  InitUrl a = parse_init_url("tcp://10.1.2.3:29500?rank=1&world_size=4");
  EXPECT_EQ(a.host, "10.1.2.3");
  EXPECT_EQ(a.port, 29500);
  EXPECT_EQ(a.query.at("rank"), "1");
  EXPECT_EQ(a.query.at("world_size"), "4");
  InitUrl b = parse_init_url("tcp://[::1]:1234");
  EXPECT_EQ(b.host, "::1");
  EXPECT_EQ(b.port, 1234);
  EXPECT_EQ(parse_init_url("file:///tmp/x").path, "/tmp/x");
  EXPECT_EQ(parse_init_url("env://").scheme, "env");
}

TEST(InitUrlTest, MalformedUrlsSayWhatIsWrong) {
  EXPECT_NE(message_of([] { parse_init_url("tcp://host"); }).find("no port"), std::string::npos);
  EXPECT_NE(message_of([] { parse_init_url("tcp://host:99999"); }).find("99999"), std::string::npos);
  EXPECT_NE(message_of([] { parse_init_url("udp://h:1"); }).find("unknown scheme 'udp'"), std::string::npos);
  EXPECT_NE(message_of([] { parse_init_url("localhost:1"); }).find("no scheme"), std::string::npos);
}

TEST(InitUrlTest, EnvNamesTheMissingOrMalformedVariable) {
  unsetenv("MASTER_ADDR");
  setenv("MASTER_PORT", "29500", 1);
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  EXPECT_NE(message_of([] { rendezvous("env://", -1, -1, std::chrono::seconds(1)); }).find("MASTER_ADDR"),
            std::string::npos);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "port", 1);
  EXPECT_NE(
      message_of([] { rendezvous("env://", -1, -1, std::chrono::seconds(1)); }).find("MASTER_PORT is 'port'"),
      std::string::npos);
  setenv("MASTER_PORT", "29500", 1);
  setenv("WORLD_SIZE", "two", 1);
  EXPECT_NE(
      message_of([] { rendezvous("env://", -1, -1, std::chrono::seconds(1)); }).find("WORLD_SIZE is 'two'"),
      std::string::npos);
  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "2", 1);
  EXPECT_NE(message_of([] {
              rendezvous("env://", -1, -1, std::chrono::seconds(1));
            }).find("rank 2 is out of range"),
            std::string::npos);
}


TEST(InitUrlTest, EnvRendezvousOfThreeRanksSharesOneStore) {
  uint16_t port = free_port();
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  std::vector<std::thread> ranks;
  std::vector<int64_t> results(3);
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      Rendezvous rv = rendezvous("env://", r, 3, std::chrono::seconds(30));
      EXPECT_EQ(rv.rank, r);
      EXPECT_EQ(rv.world_size, 3);
      rv.store->add("sum", r + 1);
      rv.store->add("arrived", 1);
      rv.store->wait({"go"});
      results[r] = rv.store->add("sum", 0);
      rv.store->add("left", 1);
      // Rank 0 hosts the server: it stays until every rank is done with it.
      while (r == 0 && rv.store->add("left", 0) < 3)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
  }
  // The test drives the barrier through its own client.
  Rendezvous probe = rendezvous("tcp://127.0.0.1:" + std::to_string(port) + "?rank=1&world_size=3", -1, -1,
                                std::chrono::seconds(30));
  while (probe.store->add("arrived", 0) < 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  probe.store->set("go", to_bytes("1"));
  for (auto& t : ranks) t.join();
  for (int64_t v : results) EXPECT_EQ(v, 6);
}

// Under a launcher that hosts the job's store (TORCHELASTIC_USE_AGENT_STORE
// =True, as torchrun's agent and cohort-bench --spawn say), rank 0 is a
// client too: were it to host, it could not bind the launcher's port.
TEST(InitUrlTest, EnvRendezvousUnderALauncherThatHostsTheStoreMakesEveryRankItsClient) {
  TcpStoreServerOptions server_options;
  server_options.host = "127.0.0.1";
  server_options.port = 0;
  server_options.token = "";
  TcpStoreServer launcher(server_options);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(launcher.port()).c_str(), 1);
  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  std::vector<std::thread> ranks;
  std::vector<std::string> errors(2);
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      errors[static_cast<size_t>(r)] = message_of([&] {
        Rendezvous rv = rendezvous("env://", r, 2, std::chrono::seconds(30));
        rv.store->add("sum", r + 1);
      });
    });
  }
  for (auto& t : ranks) t.join();
  unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  EXPECT_EQ(errors[0], "(no exception)");
  EXPECT_EQ(errors[1], "(no exception)");
  TcpStoreOptions client;
  client.port = launcher.port();
  client.token = "";
  TcpStore look("127.0.0.1", client);
  EXPECT_EQ(look.add("sum", 0), 3) << "both ranks wrote to the launcher's store";
}

TEST(InitUrlTest, TcpRendezvousWithATokenRefusesAWrongOne) {
  uint16_t port = free_port();
  std::string base = "tcp://127.0.0.1:" + std::to_string(port);
  std::thread server([&] {
    Rendezvous rv = rendezvous(base + "?token=abc", 0, 1, std::chrono::seconds(30));
    rv.store->wait({"stop"});
  });
  std::string m = message_of([&] { rendezvous(base + "?token=xyz", 1, 2, std::chrono::seconds(5)); });
  EXPECT_NE(m.find("authentication failed"), std::string::npos) << m;
  Rendezvous good = rendezvous(base + "?token=abc", 1, 2, std::chrono::seconds(30));
  good.store->set("stop", to_bytes("1"));
  server.join();
}

TEST(InitUrlTest, FileRendezvous) {
  std::string path = "/tmp/cohort-init-url-" + std::to_string(getpid());
  Rendezvous a = rendezvous("file://" + path + "?world_size=2", 0, -1, std::chrono::seconds(5));
  Rendezvous b = rendezvous("file://" + path, 1, 2, std::chrono::seconds(5));
  a.store->set("hello", to_bytes("from 0"));
  EXPECT_EQ(to_string(b.store->get("hello")), "from 0");
  EXPECT_EQ(a.store->timeout(), std::chrono::seconds(5));
}

}  // namespace
}  // namespace cohort

namespace cohort {
namespace {

TEST(InitUrlTest, EnvWithoutRankTakesMpirunsThenSlurmsVariables) {
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(free_port()).c_str(), 1);
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  setenv("SLURM_PROCID", "2", 1);
  setenv("SLURM_NTASKS", "5", 1);
  Rendezvous mpi = rendezvous("env://", -1, -1, std::chrono::seconds(5));  // hosts the store
  EXPECT_EQ(mpi.rank, 0);
  EXPECT_EQ(mpi.world_size, 3);
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  Rendezvous slurm = rendezvous("env://", -1, -1, std::chrono::seconds(5));
  EXPECT_EQ(slurm.rank, 2);
  EXPECT_EQ(slurm.world_size, 5);
  unsetenv("SLURM_PROCID");
  unsetenv("SLURM_NTASKS");
  std::string message = message_of([] { rendezvous("env://", -1, -1, std::chrono::seconds(1)); });
  EXPECT_NE(
      message.find("WORLD_SIZE is not set (nor OMPI_COMM_WORLD_SIZE of mpirun, nor SLURM_NTASKS of srun)"),
      std::string::npos)
      << message;
}

}  // namespace
}  // namespace cohort
