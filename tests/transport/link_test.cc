// Each real link against its real medium: TcpLink (src/transport/tcp/link.h)
// over a connected pair of stream sockets, and ShmLink
// (src/transport/shm/link.h) over the rings of a shared-memory arena that
// two ranks of this process map, with a socket pair for their doorbells.
// What link.h promises the engine is one contract, run over every link
// kind (LinkContract, as Gloo runs its pair tests over every transport):
// kMoved, kBlocked when there is nothing to move (no data, or no room),
// kEnded once the peer has gone and its last bytes are read, write_whole
// failing by its deadline when the bytes cannot go, and an engine over the
// link exchanging more than the medium holds, both ways at once. What only
// one kind does has its own tests below the contract: a TCP socket's
// errno and pacing, a shared-memory link's pidfd and doorbell, which it
// rings only while the peer has said it sleeps, since a doorbell is a
// system call on the fast path. A new link kind adds its pair maker to
// kLinkKinds and passes the contract before anything else.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cohort/config.h"
#include "cohort/hash_store.h"
#include "transport/engine.h"
#include "transport/patterned_bytes.h"
#include "transport/shm/arena.h"
#include "transport/shm/link.h"
#include "transport/tcp/link.h"
#include "transport/two_rank_host.h"

namespace cohort {
namespace {

using std::chrono::milliseconds;
using Outcome = LinkIo::Outcome;

using testing::generous;
using testing::pattern;

// make_socket_pair connects two non-blocking stream sockets, as a link's
// socket is.
void make_socket_pair(Socket* a, Socket* b) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0)
      << std::strerror(errno);
  *a = Socket(fds[0]);
  *b = Socket(fds[1]);
}

// readable tells whether poll(2) finds `fd` readable (or ended) within `timeout`.
bool readable(int fd, milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1 && (p.revents & (POLLIN | POLLHUP)) != 0;
}

// write_text writes `text` through `link` as two iovecs, as the engine
// writes a header and its payload.
LinkIo write_text(Link& link, const std::string& text) {
  std::string head = text.substr(0, text.size() / 2), tail = text.substr(text.size() / 2);
  iovec iov[2] = {{head.data(), head.size()}, {tail.data(), tail.size()}};
  return link.write(iov, 2);
}

// read_text reads what `link` has now, up to 256 bytes: "" when it has nothing.
std::string read_text(Link& link, Outcome* outcome) {
  char buf[256];
  const LinkIo io = link.read(buf, sizeof buf);
  *outcome = io.outcome;
  return io.outcome == Outcome::kMoved ? std::string(buf, io.bytes) : std::string();
}

// engine_over is rank `rank` of a group of two whose link to the other rank is `link`.
// `doorbell_fd` is a shared-memory rank's doorbell (EngineOptions).
std::unique_ptr<Engine> engine_over(int rank, std::unique_ptr<Link> link, int doorbell_fd = -1) {
  std::vector<std::unique_ptr<Link>> links(2);
  links[static_cast<size_t>(1 - rank)] = std::move(link);
  EngineOptions options;
  options.doorbell_fd = doorbell_fd;
  return std::make_unique<Engine>(rank, 2, std::move(links), nullptr, std::move(options));
}

// exchange_both_ways has each engine send `bytes` to the other and receive
// as many, in one exchange each, at once (a thread each); both exchanges
// must finish and the bytes arrive whole.
void exchange_both_ways(Engine& zero, Engine& one, size_t bytes) {
  const std::vector<uint8_t> out[2] = {pattern(bytes, 0), pattern(bytes, 1)};
  std::vector<uint8_t> in[2] = {std::vector<uint8_t>(bytes), std::vector<uint8_t>(bytes)};
  Engine* engines[2] = {&zero, &one};
  auto run = [&](int r) {
    const uint64_t tag = uint64_t{1} << 24;  // collective #1, step 0
    SendRequest send{1 - r, MessageKind::kCollective, tag, out[r].data(), bytes};
    RecvRequest recv{1 - r, MessageKind::kCollective, tag, in[r].data(), bytes};
    return engines[r]->exchange(&send, 1, &recv, 1, generous(), "all_to_all #1");
  };
  auto second = std::async(std::launch::async, run, 1);
  const Status first = run(0);
  const Status other = second.get();
  EXPECT_TRUE(first.ok()) << first.message();
  EXPECT_TRUE(other.ok()) << other.message();
  EXPECT_TRUE(in[0] == out[1]) << "rank 0 received other bytes than rank 1 sent";
  EXPECT_TRUE(in[1] == out[0]) << "rank 1 received other bytes than rank 0 sent";
}

// make_tcp_pair connects two TCP sockets over loopback (pacing is TCP's).
void make_tcp_pair(Socket* a, Socket* b) {
  Socket listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(listener.valid()) << std::strerror(errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(listener.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
      << std::strerror(errno);
  ASSERT_EQ(::listen(listener.fd(), 1), 0) << std::strerror(errno);
  ASSERT_EQ(::getsockname(listener.fd(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  *a = Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::connect(a->fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  *b = Socket(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(b->valid()) << std::strerror(errno);
}

// LinkPair is the two ends of one link, each a rank's, with what an engine
// over each end needs (a shared-memory rank's doorbell) and what the ends
// live on.
struct LinkPair {
  std::unique_ptr<Link> end[2];
  int doorbell[2] = {-1, -1};
  std::shared_ptr<shm::Arena> arena[2];  // the shared-memory kind's, kept while its links live
  size_t holds = 0;                      // how much the medium takes before a writer blocks (0: unknown)
};

// A link kind's pair maker: "" once `pair` is made, else why this machine
// cannot make one (the test is then skipped, saying so).
struct LinkKindCase {
  const char* name;
  std::string (*make)(LinkPair* pair);
};

// TCP over loopback, non-blocking as the transport's sockets are.
std::string make_tcp_links(LinkPair* pair) {
  Socket a, b;
  make_tcp_pair(&a, &b);
  if (::testing::Test::HasFatalFailure()) return "";
  EXPECT_TRUE(set_nonblocking(a.fd(), true).ok());
  EXPECT_TRUE(set_nonblocking(b.fd(), true).ok());
  pair->end[0] = std::make_unique<tcp::TcpLink>(std::move(a), "rank 1's end");
  pair->end[1] = std::make_unique<tcp::TcpLink>(std::move(b), "rank 0's end");
  return "";
}

// Shared memory: a two-rank host's arena, each rank mapped on a thread of
// its own, with rings of 64 KiB so that a mebibyte does not fit.
constexpr size_t kTestRingBytes = 64 * 1024;

std::string make_shm_links(LinkPair* pair) {
  set_config("COHORT_SHM_RING_BYTES", std::to_string(kTestRingBytes));
  const Status st = map_two_rank_arena(pair->arena);
  reset_config("COHORT_SHM_RING_BYTES");
  if (st.code() == StatusCode::kBackendError) return "no shared memory to map here: " + st.message();
  EXPECT_TRUE(st.ok()) << st.message();
  if (!st.ok()) return "";
  for (int r = 0; r < 2; ++r) {
    const std::string other = std::to_string(1 - r);
    pair->end[r] =
        std::make_unique<shm::ShmLink>(pair->arena[r], 1 - r, "local rank " + other, "rank " + other);
    pair->doorbell[r] = pair->arena[r]->signals().wake_fd();
  }
  pair->holds = kTestRingBytes;
  return "";
}

const LinkKindCase kLinkKinds[] = {{"tcp", make_tcp_links}, {"shm", make_shm_links}};

class LinkContract : public ::testing::TestWithParam<LinkKindCase> {
 protected:
  void SetUp() override {
    const std::string skip = GetParam().make(&pair_);
    if (!skip.empty()) GTEST_SKIP() << skip;
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_TRUE(pair_.end[0] && pair_.end[1]) << "the pair maker made no links";
  }
  Link& end(int r) { return *pair_.end[r]; }
  LinkPair pair_;
};

TEST_P(LinkContract, WritesWhatTheOtherEndReadsBothWaysAndSaysBlockedWhenThereIsNothing) {
  EXPECT_TRUE(end(0).ready());
  EXPECT_TRUE(end(1).ready());
  Outcome outcome = Outcome::kMoved;
  EXPECT_EQ(read_text(end(1), &outcome), "");
  EXPECT_EQ(outcome, Outcome::kBlocked);

  const LinkIo wrote = write_text(end(0), "hello, link");
  ASSERT_EQ(wrote.outcome, Outcome::kMoved);
  EXPECT_EQ(wrote.bytes, 11u);
  std::string got;
  // A socket may hand it over in pieces.
  for (int i = 0; i < 1000 && got.size() < 11; ++i) got += read_text(end(1), &outcome);
  EXPECT_EQ(got, "hello, link");
  EXPECT_EQ(read_text(end(1), &outcome), "");
  EXPECT_EQ(outcome, Outcome::kBlocked);

  ASSERT_EQ(write_text(end(1), "and back").bytes, 8u);
  got.clear();
  for (int i = 0; i < 1000 && got.size() < 8; ++i) got += read_text(end(0), &outcome);
  EXPECT_EQ(got, "and back");
}

TEST_P(LinkContract, SaysBlockedWhenFullAndDeliversAllItTookInOrder) {
  // The stream is `piece` over and over; each write goes on where the last stopped.
  const std::vector<uint8_t> piece = pattern(100000, 1);
  size_t took = 0;
  LinkIo io;
  for (int i = 0; i < 1000000; ++i) {
    const size_t at = took % piece.size();
    iovec iov{const_cast<uint8_t*>(piece.data()) + at, piece.size() - at};
    io = end(0).write(&iov, 1);
    if (io.outcome != Outcome::kMoved) break;
    took += io.bytes;
  }
  EXPECT_EQ(io.outcome, Outcome::kBlocked);
  ASSERT_GT(took, 0u);
  if (pair_.holds) {
    EXPECT_EQ(took, pair_.holds);
  }

  std::vector<uint8_t> buf(64 * 1024);
  size_t got = 0, wrong = 0;
  for (;;) {
    io = end(1).read(buf.data(), buf.size());
    if (io.outcome != Outcome::kMoved) break;
    for (size_t i = 0; i < io.bytes; ++i) wrong += buf[i] != piece[(got + i) % piece.size()];
    got += io.bytes;
  }
  EXPECT_EQ(io.outcome, Outcome::kBlocked);
  EXPECT_EQ(got, took);
  EXPECT_EQ(wrong, 0u);
  // Room again once read.
  iovec iov{const_cast<uint8_t*>(piece.data()), 1};
  EXPECT_EQ(end(0).write(&iov, 1).outcome, Outcome::kMoved);
}

TEST_P(LinkContract, SaysEndedOnceThePeerClosedAndItsLastBytesAreReadAndStaysEnded) {
  ASSERT_EQ(write_text(end(0), "last words").outcome, Outcome::kMoved);
  pair_.end[0].reset();  // the peer's end is gone (its process exits)

  Outcome outcome = Outcome::kMoved;
  std::string got;
  for (int i = 0; i < 1000 && got.size() < 10; ++i) got += read_text(end(1), &outcome);
  EXPECT_EQ(got, "last words") << "what the peer sent before it went still counts";
  EXPECT_EQ(read_text(end(1), &outcome), "");
  EXPECT_EQ(outcome, Outcome::kEnded);
  EXPECT_EQ(read_text(end(1), &outcome), "");
  EXPECT_EQ(outcome, Outcome::kEnded) << "and stays ended";
}

TEST_P(LinkContract, ShutDownEndsTheLinkForThePeer) {
  end(0).shut_down();
  Outcome outcome = Outcome::kMoved;
  EXPECT_EQ(read_text(end(1), &outcome), "");
  EXPECT_EQ(outcome, Outcome::kEnded);
}

TEST_P(LinkContract, WriteWholeWritesAllOrFailsByItsDeadline) {
  const std::string report = "a failure report";
  ASSERT_TRUE(end(0).write_whole(report.data(), report.size(), generous()).ok());
  Outcome outcome = Outcome::kMoved;
  std::string got;
  for (int i = 0; i < 1000 && got.size() < report.size(); ++i) got += read_text(end(1), &outcome);
  EXPECT_EQ(got, report);

  // Far more than any medium here holds, and nobody reads: a link that can
  // wait gives up at the deadline, one that cannot (a ring whose reader may
  // be the one who failed) at once.
  const std::vector<uint8_t> big(64 << 20);
  const auto start = std::chrono::steady_clock::now();
  const Status st = end(0).write_whole(big.data(), big.size(), Deadline::after(milliseconds(100)));
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(st.code() == StatusCode::kTimeout || st.code() == StatusCode::kNetworkError) << st.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "it did not stop";
}

TEST_P(LinkContract, CarriesAnEngineExchangeOfMoreThanTheMediumHoldsBothWays) {
  auto zero = engine_over(0, std::move(pair_.end[0]), pair_.doorbell[0]);
  auto one = engine_over(1, std::move(pair_.end[1]), pair_.doorbell[1]);
  exchange_both_ways(*zero, *one, size_t{4} << 20);
}

std::string kind_name(const ::testing::TestParamInfo<LinkKindCase>& param) {
  return param.param.name;
}

INSTANTIATE_TEST_SUITE_P(EveryLinkKind, LinkContract, ::testing::ValuesIn(kLinkKinds), kind_name);

// A socket also says how it broke: writing to a peer that closed is EPIPE
// (and no SIGPIPE), and it watches for room only while sends are queued.
TEST(TcpLink, WritingToAClosedPeerFailsWithEpipeAndPollsForRoomOnlyWithSends) {
  Socket a, b;
  ASSERT_NO_FATAL_FAILURE(make_socket_pair(&a, &b));
  const int b_fd = b.fd();
  auto left = std::make_unique<tcp::TcpLink>(std::move(a), "left");
  tcp::TcpLink right(std::move(b), "right");
  EXPECT_TRUE(right.ready());
  EXPECT_FALSE(right.moves_in_user_space());
  EXPECT_EQ(right.poll(false).fd, b_fd);
  EXPECT_EQ(right.poll(false).events, POLLIN);
  EXPECT_EQ(right.poll(true).events, POLLIN | POLLOUT);
  left.reset();  // the peer's process exits: its socket closes
  Outcome outcome = Outcome::kMoved;
  EXPECT_EQ(read_text(right, &outcome), "");
  EXPECT_EQ(outcome, Outcome::kEnded);
  const LinkIo io = write_text(right, "anyone?");
  EXPECT_EQ(io.outcome, Outcome::kFailed);
  EXPECT_EQ(io.error, EPIPE) << std::strerror(io.error);
}

// queued_bytes is what the kernel holds for `fd` to read (FIONREAD).
int queued_bytes(int fd) {
  int n = -1;
  EXPECT_EQ(::ioctl(fd, FIONREAD, &n), 0) << std::strerror(errno);
  return n;
}

// A TCP link reads ahead: one read takes what was asked and more from the
// socket, and the next reads are served from what it took, so that a small
// message's header and payload cost one system call. What it hands out is
// the stream in order, across what it read ahead and what it then reads
// straight into the caller's buffer, and the peer's end comes only after.
TEST(TcpLink, ReadsAheadInOneSystemCallAndHandsOutTheStreamInOrder) {
  Socket a, b;
  ASSERT_NO_FATAL_FAILURE(make_socket_pair(&a, &b));
  const int b_fd = b.fd();
  tcp::TcpLink right(std::move(b), "right");
  const std::vector<uint8_t> sent = pattern(3 * 28 + 40000, 5);  // three small frames, then a large one
  for (size_t at = 0; at < sent.size();) {  // a socket pair holds it all
    const ssize_t n = ::send(a.fd(), sent.data() + at, sent.size() - at, 0);
    ASSERT_GT(n, 0) << std::strerror(errno);
    at += static_cast<size_t>(n);
  }
  const int queued = queued_bytes(b_fd);
  std::vector<uint8_t> got(sent.size());
  size_t have = 0;
  LinkIo io = right.read(got.data(), 24);  // a frame's header
  ASSERT_EQ(io.outcome, Outcome::kMoved);
  ASSERT_EQ(io.bytes, 24u);
  have += io.bytes;
  EXPECT_LT(queued_bytes(b_fd), queued - 24) << "the first read took no more than it was asked for";
  // The three frames' payloads and headers, in the sizes the engine asks.
  for (size_t want : {4, 24, 4, 24, 4}) {
    io = right.read(got.data() + have, want);
    ASSERT_EQ(io.outcome, Outcome::kMoved);
    ASSERT_EQ(io.bytes, want);
    have += io.bytes;
  }
  a = Socket();  // the writer leaves: its bytes are still read first
  while (have < sent.size()) {  // the large frame: what was read ahead, then the socket
    io = right.read(got.data() + have, sent.size() - have);
    ASSERT_EQ(io.outcome, Outcome::kMoved) << "at byte " << have;
    have += io.bytes;
  }
  EXPECT_EQ(got, sent);
  uint8_t more;
  EXPECT_EQ(right.read(&more, 1).outcome, Outcome::kEnded);
}

// send_all_of writes `bytes` to `fd` (a socket pair holds them all).
void send_all_of(int fd, const std::vector<uint8_t>& bytes) {
  for (size_t at = 0; at < bytes.size();) {
    const ssize_t n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    ASSERT_GT(n, 0) << std::strerror(errno);
    at += static_cast<size_t>(n);
  }
}

// A read says drained when the socket had nothing more after it: the
// engine then stops reading that link until poll(2) reports it, instead of
// a recvmsg(2) per message that finds nothing. Not before the last byte
// read ahead is handed out, nor when the socket may hold more (the read
// took all it had room for); and a read still says blocked only when
// nothing is there.
TEST(TcpLink, AReadSaysDrainedWhenItLeftNothingInTheSocketOrReadAhead) {
  Socket a, b;
  ASSERT_NO_FATAL_FAILURE(make_socket_pair(&a, &b));
  const int b_fd = b.fd();
  tcp::TcpLink right(std::move(b), "right");
  auto arrived = [&](size_t n) {  // waits until the socket holds n bytes
    for (int i = 0; i < 10000 && queued_bytes(b_fd) < static_cast<int>(n); ++i)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    return queued_bytes(b_fd) >= static_cast<int>(n);
  };
  std::vector<uint8_t> got(64 * 1024);

  // A frame's header and payload: the header's read takes both, and the
  // payload's, the last byte read ahead, says drained.
  const std::vector<uint8_t> frame = pattern(28, 1);
  ASSERT_NO_FATAL_FAILURE(send_all_of(a.fd(), frame));
  ASSERT_TRUE(arrived(28));
  LinkIo io = right.read(got.data(), 24);
  ASSERT_EQ(io.outcome, Outcome::kMoved);
  ASSERT_EQ(io.bytes, 24u);
  EXPECT_FALSE(io.drained) << "four bytes were still read ahead";
  io = right.read(got.data() + 24, 4);
  ASSERT_EQ(io.outcome, Outcome::kMoved);
  ASSERT_EQ(io.bytes, 4u);
  EXPECT_TRUE(io.drained) << "the socket had nothing more";
  EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.begin() + 28), frame);
  EXPECT_EQ(right.read(got.data(), 1).outcome, Outcome::kBlocked);

  // A read that takes all the socket has straight into the caller's buffer.
  const std::vector<uint8_t> small = pattern(10, 2);
  ASSERT_NO_FATAL_FAILURE(send_all_of(a.fd(), small));
  ASSERT_TRUE(arrived(10));
  io = right.read(got.data(), 100);
  ASSERT_EQ(io.outcome, Outcome::kMoved);
  ASSERT_EQ(io.bytes, 10u);
  EXPECT_TRUE(io.drained);
  EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.begin() + 10), small);

  // More than a read has room for (what it asked, and what it reads
  // ahead): the socket may hold more, so not drained, until the last piece.
  const std::vector<uint8_t> large = pattern(40000, 3);
  ASSERT_NO_FATAL_FAILURE(send_all_of(a.fd(), large));
  ASSERT_TRUE(arrived(large.size()));
  io = right.read(got.data(), 1000);
  ASSERT_EQ(io.outcome, Outcome::kMoved);
  ASSERT_EQ(io.bytes, 1000u);
  EXPECT_FALSE(io.drained) << "1000 bytes asked and 8 KiB read ahead of 40000";
  size_t have = io.bytes;
  while (have < large.size()) {
    io = right.read(got.data() + have, large.size() - have);
    ASSERT_EQ(io.outcome, Outcome::kMoved) << "at byte " << have;
    have += io.bytes;
    EXPECT_EQ(io.drained, have == large.size()) << "at byte " << have;
  }
  EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.begin() + static_cast<long>(have)), large);
}

// pacing_of reads a socket's SO_MAX_PACING_RATE (~0: not paced).
uint64_t pacing_of(int fd) {
  uint64_t rate = 0;
  socklen_t len = sizeof rate;
  EXPECT_EQ(::getsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, &len), 0) << std::strerror(errno);
  return len == sizeof(uint32_t) ? static_cast<uint32_t>(rate) : rate;
}

bool unpaced(uint64_t rate) {
  return rate == ~uint64_t{0} || rate == UINT32_MAX;
}

// An engine told the link's rate paces its TCP links to the other hosts
// to their shares of the link, and lifts the pacing after; a link to a
// rank of its own host is never paced. Rank 0 of host_of.size() ranks
// (host_of[q]: q's host's lowest rank) sends bytes_to[q] to rank q and
// expects want[q] (0: unpaced).
void check_pacing(const std::vector<int>& host_of, const std::vector<size_t>& bytes_to,
                  const std::vector<uint64_t>& want) {
  const size_t n = host_of.size();
  std::vector<Socket> others(n);
  std::vector<int> fds(n, -1);
  std::vector<std::unique_ptr<Link>> links(n);
  for (size_t q = 1; q < n; ++q) {
    Socket end;
    ASSERT_NO_FATAL_FAILURE(make_tcp_pair(&end, &others[q]));
    fds[q] = end.fd();
    links[q] = std::make_unique<tcp::TcpLink>(std::move(end), "rank " + std::to_string(q));
  }
  EngineOptions options;
  options.host_of = host_of;
  options.link_bytes_per_second = 1200000000;
  Engine engine(0, static_cast<int>(n), std::move(links), nullptr, options);
  for (size_t q = 1; q < n; ++q) ASSERT_TRUE(unpaced(pacing_of(fds[q]))) << "paced before it was asked";
  engine.pace_by_share(bytes_to);
  for (size_t q = 1; q < n; ++q) {
    if (want[q]) {
      EXPECT_EQ(pacing_of(fds[q]), want[q]) << "the stream to rank " << q;
    } else {
      EXPECT_TRUE(unpaced(pacing_of(fds[q])))
          << "the link to rank " << q << " was paced: " << pacing_of(fds[q]);
    }
  }
  engine.pace_by_share({});
  for (size_t q = 1; q < n; ++q)
    EXPECT_TRUE(unpaced(pacing_of(fds[q]))) << "rank " << q << "'s pacing stayed";
}

TEST(TcpLink, AnEngineToldTheLinkRatePacesEachStreamToItsShareAndLiftsItAfter) {
  const size_t mib = size_t{1} << 20;
  // Three hosts of one rank, equal splits: two streams, half the link each.
  check_pacing({0, 1, 2}, {0, mib, mib}, {0, 600000000, 600000000});
  // Two hosts of two ranks: this rank has half the link (the other rank
  // here sends as much), a quarter to each of ranks 2 and 3; 0->1 stays
  // within the host, unpaced.
  check_pacing({0, 0, 2, 2}, {0, mib, mib, mib}, {0, 0, 300000000, 300000000});
  // Uneven splits share by bytes: 3 MiB and 1 MiB of this rank's half.
  check_pacing({0, 0, 2, 2}, {0, mib, 3 * mib, mib}, {0, 0, 450000000, 150000000});
  // A stream that carries nothing is not held back.
  check_pacing({0, 1, 2}, {0, mib, 0}, {0, 1200000000, 0});
}

TEST(TcpLink, AnEngineThatDoesNotKnowTheLinkRatePacesNothing) {
  Socket end, other;
  ASSERT_NO_FATAL_FAILURE(make_tcp_pair(&end, &other));
  const int fd = end.fd();
  auto engine = engine_over(0, std::make_unique<tcp::TcpLink>(std::move(end), "rank 1"));
  engine->pace_by_share({0, size_t{64} << 20});
  EXPECT_TRUE(unpaced(pacing_of(fd))) << pacing_of(fd);
}

// ShmLinkTest is the shared-memory pair of the contract above, for what
// only a shared-memory link does: its doorbell and its peer's pidfd.
class ShmLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string skip = make_shm_links(&pair_);
    if (!skip.empty()) GTEST_SKIP() << skip;
    ASSERT_FALSE(HasFatalFailure());
  }
  shm::ShmLink& link(int r) { return static_cast<shm::ShmLink&>(*pair_.end[r]); }
  LinkPair pair_;
};

TEST_F(ShmLinkTest, ReadsWhatThePeerLeftInTheRingThenTheEndOnceThePeerClosedItsLink) {
  ASSERT_EQ(write_text(link(0), "bye").outcome, Outcome::kMoved);
  const int bell = pair_.arena[1]->signals().wake_fd();
  ASSERT_GE(bell, 0);
  EXPECT_FALSE(readable(bell, milliseconds(0))) << "rank 1 never said it sleeps";
  pair_.end[0].reset();  // the peer's link is gone: its ring to rank 1 closes

  EXPECT_TRUE(readable(bell, milliseconds(5000))) << "a close rings even a rank that is awake";
  drain_wake_ups(bell);  // as another thread of rank 1 may have, before it looks at the ring
  EXPECT_TRUE(link(1).about_to_sleep(false)) << "the close waits to be read: no sleep past it";
  link(1).awake();
  Outcome outcome = Outcome::kMoved;
  EXPECT_EQ(read_text(link(1), &outcome), "bye") << "the ring is read to its end first";
  EXPECT_EQ(read_text(link(1), &outcome), "");
  EXPECT_EQ(outcome, Outcome::kEnded);
  EXPECT_EQ(read_text(link(1), &outcome), "");
  EXPECT_EQ(outcome, Outcome::kEnded) << "and stays ended";
}

TEST_F(ShmLinkTest, WatchesThePeersPidfdAndEndsOnceItSaysThePeerExited) {
  // Both ranks are this process here: the pidfd it watches is its own,
  // which never becomes readable while the test runs, so poll(2)'s answer
  // is given by hand. A real exit is the process tests' (KilledPeer...,
  // KillDuring...: tests/process_group/process_test.cc).
  shm::ShmLink& one = link(1);
  const LinkPoll watch = one.poll(false);
  ASSERT_GE(watch.fd, 0) << "a shared-memory link watches its peer's process";
  EXPECT_EQ(watch.events, POLLIN);
  EXPECT_FALSE(readable(watch.fd, milliseconds(0))) << "the peer is alive";
  EXPECT_NE(watch.fd, pair_.arena[1]->signals().wake_fd()) << "the doorbell is polled once, by the engine";
  bool became_ready = true;
  EXPECT_FALSE(one.about_to_sleep(false)) << "nothing waits: it may sleep";
  one.awake();
  ASSERT_TRUE(one.on_ready(POLLIN, &became_ready).ok()) << "as poll(2) says once the peer exited";
  EXPECT_FALSE(became_ready);
  EXPECT_EQ(one.poll(false).fd, -1) << "nothing left to watch";
  EXPECT_TRUE(one.about_to_sleep(false)) << "its end waits to be read: no sleep past it";
  one.awake();
  ASSERT_EQ(write_text(link(0), "last").outcome, Outcome::kMoved);
  Outcome outcome = Outcome::kMoved;
  EXPECT_EQ(read_text(one, &outcome), "last") << "what it left in the ring still counts";
  EXPECT_EQ(read_text(one, &outcome), "");
  EXPECT_EQ(outcome, Outcome::kEnded);
}

TEST_F(ShmLinkTest, RingsThePeersDoorbellOnlyWhileThePeerSaidItSleeps) {
  shm::ShmLink& zero = link(0);
  shm::ShmLink& one = link(1);
  const int bell = pair_.arena[1]->signals().wake_fd();
  ASSERT_GE(bell, 0);

  zero.moved();
  EXPECT_FALSE(readable(bell, milliseconds(0))) << "rank 1 is awake: no doorbell";
  EXPECT_FALSE(one.about_to_sleep(false)) << "nothing waits for rank 1, so it may sleep";
  zero.moved();
  EXPECT_TRUE(readable(bell, milliseconds(5000))) << "rank 1 sleeps: a doorbell";
  zero.moved();
  drain_wake_ups(bell);
  EXPECT_FALSE(readable(bell, milliseconds(0))) << "draining takes every doorbell byte";
  char c;
  EXPECT_EQ(one.read(&c, 1).outcome, Outcome::kBlocked) << "a doorbell is not the end";
  one.awake();
  zero.moved();
  EXPECT_FALSE(readable(bell, milliseconds(0))) << "rank 1 is awake again: no doorbell";

  // about_to_sleep answers true where sleeping would miss something: room
  // in the ring for sends, or bytes already waiting.
  EXPECT_TRUE(one.about_to_sleep(true)) << "its ring to rank 0 has room for its sends";
  one.awake();
  ASSERT_EQ(write_text(zero, "x").outcome, Outcome::kMoved);
  EXPECT_TRUE(one.about_to_sleep(false)) << "a byte waits in its ring";
  one.awake();
}

}  // namespace
}  // namespace cohort
