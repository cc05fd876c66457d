// Socket helpers: addresses of every family, deadlines, clear failures.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <fstream>
#include <set>
#include <thread>

#include "common/socket.h"

namespace cohort {
namespace {

using std::chrono::milliseconds;

uint16_t unused_port() {
  auto s = listen_tcp("127.0.0.1", 0);
  return local_port(s.value().fd());
}

void expect_echo(const std::string& listen_host, const std::string& connect_host) {
  auto listener = listen_tcp(listen_host, 0);
  ASSERT_TRUE(listener.ok()) << listener.status().message();
  uint16_t port = local_port(listener.value().fd());
  ASSERT_NE(port, 0);
  auto client = connect_tcp(connect_host, port, Deadline::after(milliseconds(5000)));
  ASSERT_TRUE(client.ok()) << client.status().message();
  int accepted = -1;
  for (int i = 0; i < 500 && accepted < 0; ++i) {
    accepted = ::accept(listener.value().fd(), nullptr, nullptr);
    if (accepted < 0) std::this_thread::sleep_for(milliseconds(2));
  }
  ASSERT_GE(accepted, 0);
  Socket server_side(accepted);
  ASSERT_TRUE(send_all(client.value().fd(), "ping", 4, Deadline::after(milliseconds(1000))).ok());
  char buf[8] = {};
  auto got = recv_some(server_side.fd(), buf, sizeof buf, Deadline::after(milliseconds(1000)));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(std::string(buf, got.value()), "ping");
}

// A port for a server that another process binds later is never one the
// kernel could hand out meanwhile (a listener on port 0, a connection's end).
TEST(SocketTest, APortToBindLaterLiesBelowTheEphemeralRangeAndCanBeBound) {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int first = 0;
  ASSERT_TRUE(static_cast<bool>(range >> first));
  if (first <= 11000) GTEST_SKIP() << "the ephemeral range starts at " << first << ": nothing lies below it";
  std::set<uint16_t> seen;
  for (int i = 0; i < 20; ++i) {
    const uint16_t port = port_to_bind_later();
    EXPECT_LT(port, first);
    EXPECT_GE(port, 10000);
    EXPECT_TRUE(listen_tcp("", port).ok()) << port;
    seen.insert(port);
  }
  EXPECT_GT(seen.size(), 10u) << "drawn at random, so that two jobs rarely meet";
}

TEST(SocketTest, Ipv4Loopback) {
  expect_echo("127.0.0.1", "127.0.0.1");
}
TEST(SocketTest, Ipv6Loopback) {
  expect_echo("::1", "::1");
}
TEST(SocketTest, EveryAddressAcceptsIpv4AndIpv6) {
  expect_echo("", "127.0.0.1");
  expect_echo("", "::1");
}
TEST(SocketTest, HostNames) {
  expect_echo("localhost", "localhost");
}

TEST(SocketTest, ConnectRetriesUntilTheDeadlineThenNamesTheAddress) {
  uint16_t port = unused_port();
  auto start = Clock::now();
  auto r = connect_tcp("127.0.0.1", port, Deadline::after(milliseconds(250)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
  EXPECT_NE(r.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos);
  EXPECT_NE(r.status().message().find("refused"), std::string::npos) << r.status().message();
  EXPECT_GE(Clock::now() - start, milliseconds(200)) << "gave up before the deadline";
}

TEST(SocketTest, UnresolvableHostIsANetworkErrorNamingIt) {
  auto r = connect_tcp("no-such-host.invalid", 80, Deadline::after(milliseconds(2000)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNetworkError);
  EXPECT_NE(r.status().message().find("no-such-host.invalid"), std::string::npos);
}

TEST(SocketTest, PortInUseIsANetworkErrorNamingTheAddress) {
  auto first = listen_tcp("127.0.0.1", 0);
  uint16_t port = local_port(first.value().fd());
  // SO_REUSEADDR does not allow two listeners on one port.
  auto second = listen_tcp("127.0.0.1", port);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(std::to_string(port)), std::string::npos);
}

TEST(SocketTest, ReceiveFromAClosedPeerIsANetworkError) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  Socket a(fds[0]);
  { Socket b(fds[1]); }
  char c;
  auto r = recv_some(a.fd(), &c, 1, Deadline::after(milliseconds(1000)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNetworkError);
}

TEST(SocketTest, ReceiveHonoursTheDeadline) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  Socket a(fds[0]), b(fds[1]);
  char c;
  auto r = recv_some(a.fd(), &c, 1, Deadline::after(milliseconds(50)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
}

TEST(DeadlineTest, ZeroTimeoutMeansNever) {
  EXPECT_TRUE(Deadline::after(milliseconds(0)).is_never());
  EXPECT_EQ(Deadline::never().poll_timeout_ms(), -1);
  EXPECT_FALSE(Deadline::after(milliseconds(100000)).expired());
}

}  // namespace
}  // namespace cohort

namespace cohort {
namespace {

TEST(SplitAddress, ReadsWhatFormatAddressWritesAndRefusesWhatIsNoAddress) {
  std::string host;
  uint16_t port = 0;
  for (const auto& [h, p] :
       std::vector<std::pair<std::string, uint16_t>>{{"10.0.0.3", 4711}, {"::1", 80}, {"h", 65535}}) {
    ASSERT_TRUE(split_address(format_address(h, p), &host, &port)) << format_address(h, p);
    EXPECT_EQ(host, h);
    EXPECT_EQ(port, p);
  }
  for (const char* bad : {"10.0.0.3", "10.0.0.3:", "h:0", "h:65536", "h:12x", "h:-5"}) {
    EXPECT_FALSE(split_address(bad, &host, &port)) << bad;
  }
}

}  // namespace
}  // namespace cohort
