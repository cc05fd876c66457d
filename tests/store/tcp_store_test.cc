// TcpStore beyond the conformance suite: addresses, authentication, waiting
// for workers, and what a client sees when the server goes away.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "cohort/errors.h"
#include "cohort/tcp_store.h"
#include "cohort/tcp_store_server.h"
#include "common/socket.h"
#include "support/messages.h"

namespace cohort {
namespace {

using std::chrono::milliseconds;

TcpStoreOptions client_options(uint16_t port, std::optional<std::string> token = std::string()) {
  TcpStoreOptions o;
  o.port = port;
  o.timeout = std::chrono::seconds(20);
  o.token = std::move(token);
  return o;
}

std::unique_ptr<TcpStoreServer> start_server(const std::string& host, std::string token = "") {
  TcpStoreServerOptions so;
  so.host = host;
  so.port = 0;
  so.token = std::move(token);
  return std::make_unique<TcpStoreServer>(so);
}

using testing::message_of;

TEST(TcpStoreTest, ServerInsideTheClientPicksAFreePortWhenAskedForZero) {
  TcpStoreOptions o = client_options(0);
  o.is_server = true;
  TcpStore store("127.0.0.1", o);
  EXPECT_NE(store.port(), 0);
  ASSERT_NE(store.server(), nullptr);
  EXPECT_EQ(store.server()->port(), store.port());
  TcpStore other("127.0.0.1", client_options(store.port()));
  other.set("k", to_bytes("v"));
  EXPECT_EQ(to_string(store.get("k")), "v");
}

TEST(TcpStoreTest, WorksOverIpv6Loopback) {
  auto server = start_server("::1");
  TcpStore store("::1", client_options(server->port()));
  store.set("six", to_bytes("yes"));
  EXPECT_EQ(to_string(store.get("six")), "yes");
}

TEST(TcpStoreTest, ServerOnEveryAddressIsReachableByHostName) {
  auto server = start_server("");
  TcpStore store("localhost", client_options(server->port()));
  EXPECT_EQ(store.add("n", 2), 2);
}

TEST(TcpStoreTest, ClientWaitsForAServerThatStartsLater) {
  uint16_t port;
  {
    auto probe = listen_tcp("127.0.0.1", 0);
    ASSERT_TRUE(probe.ok());
    port = local_port(probe.value().fd());
  }
  std::unique_ptr<TcpStoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(milliseconds(300));
    TcpStoreServerOptions so;
    so.host = "127.0.0.1";
    so.port = port;
    server = std::make_unique<TcpStoreServer>(so);
  });
  TcpStore store("127.0.0.1", client_options(port));
  store.set("up", to_bytes("1"));
  starter.join();
  EXPECT_EQ(server->stats().keys, 1);
}

TEST(TcpStoreTest, NoServerIsATimeoutNamingTheAddress) {
  uint16_t port;
  {
    auto probe = listen_tcp("127.0.0.1", 0);
    port = local_port(probe.value().fd());
  }
  TcpStoreOptions o = client_options(port);
  o.timeout = milliseconds(300);
  std::string m = message_of([&] { TcpStore store("127.0.0.1", o); });
  EXPECT_NE(m.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << m;
  EXPECT_THROW(TcpStore("127.0.0.1", o), TimeoutError);
}

TEST(TcpStoreTest, WrongTokenIsRefusedOnBothSidesBeforeAnyKeyIsWritten) {
  auto server = start_server("127.0.0.1", "right");
  std::string m = message_of([&] { TcpStore store("127.0.0.1", client_options(server->port(), "wrong")); });
  EXPECT_NE(m.find("authentication failed"), std::string::npos) << m;
  EXPECT_THROW(TcpStore("127.0.0.1", client_options(server->port(), "wrong")), StoreError);
  auto stats = server->stats();
  EXPECT_EQ(stats.refused_authentications, 2);
  EXPECT_EQ(stats.keys, 0);
  TcpStore good("127.0.0.1", client_options(server->port(), "right"));
  good.set("after", to_bytes("ok"));
  EXPECT_EQ(to_string(good.get("after")), "ok");
}

TEST(TcpStoreTest, ClientWithoutTokenIsToldToSetOneAtItsFirstCall) {
  // Without a token the client does not wait for the server's hello before
  // its first request (one round trip less per connection), so the refusal
  // comes with the first call, and the server never executes that call.
  auto server = start_server("127.0.0.1", "right");
  TcpStore store("127.0.0.1", client_options(server->port(), ""));
  std::string m = message_of([&] { store.set("sneaky", to_bytes("x")); });
  EXPECT_NE(m.find("requires authentication"), std::string::npos) << m;
  EXPECT_NE(m.find("COHORT_STORE_TOKEN"), std::string::npos) << m;
  EXPECT_THROW(store.check({"sneaky"}), StoreError) << "every later call is refused too";
  EXPECT_EQ(server->stats().keys, 0);
}

TEST(TcpStoreTest, ClientWithTokenRefusesAServerThatAsksForNone) {
  auto server = start_server("127.0.0.1", "");
  std::string m = message_of([&] { TcpStore store("127.0.0.1", client_options(server->port(), "mine")); });
  EXPECT_NE(m.find("does not ask for one"), std::string::npos) << m;
}

TEST(TcpStoreTest, ServerSideWaitsForWorkersAndNamesTheCountOnTimeout) {
  TcpStoreOptions o = client_options(0);
  o.is_server = true;
  o.num_workers = 3;
  o.timeout = milliseconds(300);
  std::string m = message_of([&] { TcpStore store("127.0.0.1", o); });
  EXPECT_NE(m.find("only 1 of 3 workers"), std::string::npos) << m;
}

TEST(TcpStoreTest, ServerSideReturnsOnceEveryWorkerConnected) {
  uint16_t port;
  {
    auto probe = listen_tcp("", 0);
    port = local_port(probe.value().fd());
  }
  std::vector<std::thread> workers;
  for (int i = 0; i < 2; ++i) {
    workers.emplace_back([port] {
      TcpStoreOptions o = client_options(port);
      o.num_workers = 3;
      TcpStore store("127.0.0.1", o);
      store.wait({"go"});
    });
  }
  TcpStoreOptions o = client_options(port);
  o.is_server = true;
  o.num_workers = 3;
  TcpStore server_side("127.0.0.1", o);
  EXPECT_EQ(server_side.add("cohort/tcpstore/workers", 0), 3);
  server_side.set("go", to_bytes("1"));
  for (auto& w : workers) w.join();
}

TEST(TcpStoreTest, KeyLongerThanTheLimitIsInvalidArgumentAndTheConnectionSurvives) {
  auto server = start_server("127.0.0.1");
  TcpStore store("127.0.0.1", client_options(server->port()));
  std::string m = message_of([&] { store.set(std::string(70000, 'k'), to_bytes("v")); });
  EXPECT_NE(m.find("COHORT_STORE_MAX_KEY_BYTES"), std::string::npos) << m;
  store.set("short", to_bytes("v"));
  EXPECT_EQ(to_string(store.get("short")), "v");
}

TEST(TcpStoreTest, ServerGoingAwayFailsABlockedGetWithStoreError) {
  auto server = start_server("127.0.0.1");
  TcpStoreOptions o = client_options(server->port());
  o.timeout = std::chrono::seconds(60);
  TcpStore store("127.0.0.1", o);
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(200));
    server.reset();
  });
  std::string m = message_of([&] { store.get("never"); });
  stopper.join();
  EXPECT_NE(m.find("connection closed"), std::string::npos) << m;
  EXPECT_NE(m.find("never"), std::string::npos) << m;
  store.set_timeout(milliseconds(300));
  EXPECT_THROW(store.get("never"), TimeoutError) << "the reconnect finds no server";
}

TEST(TcpStoreTest, AReconnectToAServerThatHasGoneGivesUpInSecondsNotAfterTheTimeout) {
  // As at the end of a job: the rank that hosted the store left, and this
  // one still has a call to make (its monitor's last progress). Retrying
  // for the store's timeout held that rank's exit up for all of it.
  auto server = start_server("127.0.0.1");
  TcpStoreOptions o = client_options(server->port());
  o.timeout = std::chrono::seconds(60);
  TcpStore store("127.0.0.1", o);
  store.set("k", to_bytes("v"));
  server.reset();
  (void)message_of([&] { store.set("k", to_bytes("w")); });  // finds the connection closed
  const auto start = std::chrono::steady_clock::now();
  std::string m = message_of([&] { store.set("k", to_bytes("x")); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << m;
  EXPECT_NE(m.find("within 2000 ms of the connection being lost (its server has gone)"), std::string::npos)
      << m;
}

// error_of_a_first_set connects to the service on `port`, hosted by
// `owner`, and sets a key: the StoreError's message, and how long it took.
std::string error_of_a_first_set(uint16_t port, const std::string& owner, std::chrono::seconds* took) {
  TcpStoreOptions o = client_options(port);
  o.timeout = std::chrono::seconds(60);
  o.server_owner = owner;
  const auto start = std::chrono::steady_clock::now();
  std::string m;
  try {
    TcpStore store("127.0.0.1", o);
    store.set("k", to_bytes("v"));
    ADD_FAILURE() << "a service that is not a store took a key";
  } catch (const StoreError& e) {
    m = e.what();
  }
  *took = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start);
  return m;
}

// Another service on the port that answers nothing (torch 2.13's libuv
// TCPStore, hosted by torchrun's agent, waits for more of its own
// protocol): the client says so within seconds, not at the store's timeout.
TEST(TcpStoreTest, AServerThatSendsNoHelloIsAStoreErrorWithinSecondsSayingWhatItMayBe) {
  auto silent = listen_tcp("127.0.0.1", 0);  // connections queue; nothing is ever read or written
  ASSERT_TRUE(silent.ok());
  std::chrono::seconds took{};
  const std::string m = error_of_a_first_set(local_port(silent.value().fd()), "the launcher", &took);
  EXPECT_LT(took, std::chrono::seconds(40)) << m;
  EXPECT_NE(m.find("(hosted by the launcher) sent no store hello within 10 s: it is not a cohort store"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("launch them with cohortrun"), std::string::npos) << m;
}

// torch's non-libuv TCPStore (use_libuv=False) reads the cohort hello,
// cannot parse it, and resets the connection: the same clear error, not a
// lost server.
// expect_hang_up_named has a first set meet a service that hangs up on every
// connection, and checks that the StoreError says what the service may be.
// `reset_at_once` closes each connection with a reset before reading
// anything, so the client's hello or request may fail to go out (the other
// order reads the hello's first bytes and closes, which also resets).
void expect_hang_up_named(bool reset_at_once) {
  auto listener = listen_tcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  const int listen_fd = listener.value().fd();
  std::thread hang_up([listen_fd, reset_at_once] {
    for (int i = 0; i < 8; ++i) {  // the client may retry; answer every try alike
      pollfd p{listen_fd, POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) return;
      const int fd = ::accept(listen_fd, nullptr, nullptr);
      if (fd < 0) return;
      if (reset_at_once) {
        const linger reset{1, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
      } else {
        char some[4];
        (void)!::read(fd, some, sizeof some);
      }
      ::close(fd);
    }
  });
  std::chrono::seconds took{};
  const std::string m = error_of_a_first_set(local_port(listen_fd), "torchrun's agent", &took);
  EXPECT_LT(took, std::chrono::seconds(30)) << m;
  EXPECT_NE(m.find("(hosted by torchrun's agent) closed the connection before any store hello"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("it is not a cohort store"), std::string::npos) << m;
  EXPECT_NE(m.find("launch them with cohortrun"), std::string::npos) << m;
  ::shutdown(listen_fd, SHUT_RDWR);
  hang_up.join();
}

TEST(TcpStoreTest, AServerThatHangsUpOnTheHelloIsAStoreErrorSayingWhatItMayBe) {
  expect_hang_up_named(/*reset_at_once=*/false);
}

TEST(TcpStoreTest, AServerThatResetsEachConnectionAtOnceIsAStoreErrorSayingWhatItMayBe) {
  expect_hang_up_named(/*reset_at_once=*/true);
}

TEST(TcpStoreTest, ManyWaitersOnOneKeyAreAllWokenBySet) {
  auto server = start_server("127.0.0.1");
  constexpr int kWaiters = 32;
  std::vector<std::thread> threads;
  std::atomic<int> woken{0};
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&] {
      TcpStore c("127.0.0.1", client_options(server->port()));
      c.get("signal");
      woken++;
    });
  }
  while (server->stats().pending_waits < kWaiters) std::this_thread::sleep_for(milliseconds(5));
  TcpStore setter("127.0.0.1", client_options(server->port()));
  setter.set("signal", to_bytes("go"));
  for (auto& t : threads) t.join();
  EXPECT_EQ(woken.load(), kWaiters);
  EXPECT_EQ(server->stats().pending_waits, 0);
}

}  // namespace
}  // namespace cohort
