// Hostile input against a running cohort-store: after each attack the
// server is alive, other clients get correct answers, and its memory stays
// bounded.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "cohort/tcp_store.h"
#include "common/byte_codec.h"
#include "common/socket.h"
#include "store/wire_protocol.h"
#include "support/subprocess.h"

namespace cohort::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The server may hold this much more than when it started, whatever a
// client does (its limits are 1 MiB of output and one frame of input per
// connection; the attacks below stay far from the frame limit).
constexpr long kMemoryBoundKib = 64 * 1024;

class HostileInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<Subprocess>(
        std::vector<std::string>{binary_path("tools/cohort-store"), "--host", "127.0.0.1", "--port", "0"});
    std::string line = daemon_->read_line(seconds(20));
    ASSERT_NE(line.find("listening on"), std::string::npos) << line;
    port_ = static_cast<uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
    baseline_kib_ = daemon_->rss_kib();
  }

  // raw opens a plain socket to the server.
  Socket raw() {
    auto s = connect_tcp("127.0.0.1", port_, Deadline::after(seconds(10)));
    EXPECT_TRUE(s.ok()) << s.status().message();
    return std::move(s.value());
  }

  // hello completes a valid handshake on a raw socket.
  void hello(const Socket& s) {
    wire::ClientHello h;
    auto bytes = wire::encode_client_hello(h);
    ASSERT_TRUE(send_all(s.fd(), bytes.data(), bytes.size(), Deadline::after(seconds(5))).ok());
    uint8_t reply[wire::kServerHelloBytes];
    size_t got = 0;
    while (got < sizeof reply) {
      auto r = recv_some(s.fd(), reply + got, sizeof reply - got, Deadline::after(seconds(5)));
      ASSERT_TRUE(r.ok()) << r.status().message();
      got += r.value();
    }
  }

  // closed_by_server is true when the server closes `s` within a few seconds.
  bool closed_by_server(const Socket& s) {
    char buf[256];
    for (;;) {
      auto r = recv_some(s.fd(), buf, sizeof buf, Deadline::after(seconds(5)));
      if (!r.ok()) return r.status().code() == StatusCode::kNetworkError;
    }
  }

  // expect_healthy checks that the server answers correctly and holds
  // bounded memory.
  void expect_healthy() {
    ASSERT_TRUE(daemon_->alive()) << "the server died";
    TcpStoreOptions o;
    o.port = port_;
    o.timeout = seconds(10);
    TcpStore client("127.0.0.1", o);
    std::string key = "health/" + std::to_string(checks_++);
    client.set(key, to_bytes("fine"));
    EXPECT_EQ(to_string(client.get(key)), "fine");
    EXPECT_EQ(client.add(key + "/n", 2), 2);
    long rss = daemon_->rss_kib();
    EXPECT_LT(rss - baseline_kib_, kMemoryBoundKib)
        << "server RSS grew from " << baseline_kib_ << " to " << rss << " KiB";
  }

  std::unique_ptr<Subprocess> daemon_;
  uint16_t port_ = 0;
  long baseline_kib_ = 0;
  int checks_ = 0;
};

TEST_F(HostileInputTest, WrongMagicClosesThatConnectionOnly) {
  Socket s = raw();
  std::vector<uint8_t> junk(wire::kClientHelloBytes, 'G');  // "GGGG...": an HTTP client, say
  ASSERT_TRUE(send_all(s.fd(), junk.data(), junk.size(), Deadline::after(seconds(5))).ok());
  EXPECT_TRUE(closed_by_server(s));
  expect_healthy();
}

TEST_F(HostileInputTest, TruncatedFrameThenHangUp) {
  Socket s = raw();
  hello(s);
  std::vector<uint8_t> frame;
  wire::encode_request(wire::Request{wire::Op::kSet, {"key"}, {Bytes(1000, 7)}, 0}, &frame);
  ASSERT_TRUE(send_all(s.fd(), frame.data(), frame.size() / 2, Deadline::after(seconds(5))).ok());
  s.reset();
  expect_healthy();
}

TEST_F(HostileInputTest, LengthOfTwoToTheSixtyThirdClosesThatConnectionOnly) {
  Socket s = raw();
  hello(s);
  std::vector<uint8_t> header;
  ByteWriter(&header).u64(uint64_t{1} << 63);
  ASSERT_TRUE(send_all(s.fd(), header.data(), header.size(), Deadline::after(seconds(5))).ok());
  EXPECT_TRUE(closed_by_server(s));
  expect_healthy();
}

TEST_F(HostileInputTest, UnknownOpcodeClosesThatConnectionOnly) {
  Socket s = raw();
  hello(s);
  std::vector<uint8_t> frame;
  ByteWriter w(&frame);
  w.u64(1);
  w.u8(250);
  ASSERT_TRUE(send_all(s.fd(), frame.data(), frame.size(), Deadline::after(seconds(5))).ok());
  EXPECT_TRUE(closed_by_server(s));
  expect_healthy();
}

TEST_F(HostileInputTest, ClientSendingOneBytePerSecondDoesNotHoldUpOthers) {
  Socket slow = raw();
  hello(slow);
  std::vector<uint8_t> frame;
  wire::encode_request(wire::Request{wire::Op::kSet, {"slow"}, {to_bytes("v")}, 0}, &frame);
  std::thread dribble([&] {
    for (size_t i = 0; i < 3; ++i) {
      ASSERT_TRUE(send_all(slow.fd(), &frame[i], 1, Deadline::after(seconds(5))).ok());
      std::this_thread::sleep_for(seconds(1));
    }
  });
  for (int i = 0; i < 3; ++i) expect_healthy();
  dribble.join();
  expect_healthy();
}

TEST_F(HostileInputTest, ThousandRapidConnectDisconnects) {
  for (int i = 0; i < 1000; ++i) {
    Socket s = raw();
    if (i % 2) hello(s);  // half of them get as far as the hello
  }
  expect_healthy();
}

TEST_F(HostileInputTest, ClientThatNeverReadsItsRepliesIsHeldToABoundedBuffer) {
  {
    TcpStoreOptions o;
    o.port = port_;
    TcpStore setup("127.0.0.1", o);
    setup.set("big", Bytes(1 << 20, 1));  // each get of it is a 1 MiB reply
  }
  Socket greedy = raw();
  hello(greedy);
  std::vector<uint8_t> batch;
  for (int i = 0; i < 10000; ++i) {
    wire::encode_request(wire::Request{wire::Op::kGet, {"big"}, {}, 0}, &batch);
  }
  // Each batch asks for 10000 replies (10 GiB) and we read none of them. The
  // server stops reading our requests once its output buffer for us is
  // full, so once the kernel's socket buffers are full too our sends block.
  int batches = 0;
  for (; batches < 100; ++batches) {
    if (!send_all(greedy.fd(), batch.data(), batch.size(), Deadline::after(milliseconds(500))).ok()) break;
  }
  EXPECT_LT(batches, 100) << "the server kept reading requests while its replies were not being read";
  expect_healthy();
}

TEST_F(HostileInputTest, RawClientSkippingAuthenticationCannotWrite) {
  daemon_.reset();
  std::string token_file = "/tmp/cohort-hostile-token-" + std::to_string(getpid());
  {
    FILE* f = fopen(token_file.c_str(), "w");
    fputs("tok", f);
    fclose(f);
  }
  daemon_ = std::make_unique<Subprocess>(std::vector<std::string>{
      binary_path("tools/cohort-store"), "--host", "127.0.0.1", "--port", "0", "--token-file", token_file});
  std::string line = daemon_->read_line(seconds(20));
  port_ = static_cast<uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
  unlink(token_file.c_str());
  Socket s = raw();
  hello(s);
  // Skip the proof: send a set request straight away. The server reads the
  // first 32 bytes as a proof, refuses it and closes.
  std::vector<uint8_t> frame;
  wire::encode_request(wire::Request{wire::Op::kSet, {"intruder"}, {Bytes(64, 'x')}, 0}, &frame);
  ASSERT_TRUE(send_all(s.fd(), frame.data(), frame.size(), Deadline::after(seconds(5))).ok());
  EXPECT_TRUE(closed_by_server(s));
  TcpStoreOptions o;
  o.port = port_;
  o.token = "tok";
  TcpStore client("127.0.0.1", o);
  EXPECT_FALSE(client.check({"intruder"}));
}

}  // namespace
}  // namespace cohort::testing
