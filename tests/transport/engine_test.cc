// The engine (src/transport/engine.h) over in-memory links (memory_link.h):
// order and matching, messages that come before their receive, desyncs,
// deadlines, peers that vanish, failure relay, pipelined receives, and the
// promise that every completion runs exactly once. The links are queues in
// this process, so each situation is made on purpose (a full pipe, a cut in
// the middle of a message) rather than hoped for over a socket. Engines that
// must progress at once run on threads; the others are turned one loop at a
// time on the test's thread (pump), which is deterministic.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "common/relayed_cause.h"
#include "transport/memory_link.h"
#include "transport/patterned_bytes.h"

namespace cohort {
namespace {

using std::chrono::milliseconds;
using testing::memory_group;
using testing::MemoryGroup;
using testing::MemoryPipeOptions;

constexpr MessageKind kP2p = MessageKind::kPointToPoint;
constexpr MessageKind kCollective = MessageKind::kCollective;

using testing::generous;

// collective_tag is step `step` of collective #`sequence`, as the
// algorithms tag their messages.
uint64_t collective_tag(uint64_t sequence, uint64_t step) {
  return (sequence << 24) | step;
}

using testing::pattern;

// says checks that `status` is an error whose message holds `text`.
::testing::AssertionResult says(const Status& status, const std::string& text) {
  if (!status.ok() && status.message().find(text) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected an error saying \"" << text << "\", got "
                                       << (status.ok() ? "ok" : "\"" + status.message() + "\"");
}

// turn runs one turn of `engine`'s loop: it moves what its links can move
// now, completes what that finishes, and returns.
void turn(Engine& engine) {
  engine.progress(Deadline::at(Clock::now()));
}

// pump turns every engine of `group` that has requests pending, round
// after round on this thread, until none has or `deadline` passes; true
// when all finished.
bool pump(MemoryGroup& group, Deadline deadline = generous()) {
  for (;;) {
    bool pending = false;
    for (auto& engine : group.engines) {
      if (!engine || !engine->has_pending()) continue;
      pending = true;
      turn(*engine);
    }
    if (!pending) return true;
    if (deadline.expired()) return false;
  }
}

// drive progresses `engine` until nothing is pending or `deadline` passes:
// the whole job of a rank's thread.
void drive(Engine& engine, Deadline deadline = generous()) {
  while (engine.has_pending() && !deadline.expired()) engine.progress(deadline);
}

// Ledger records what each request's Completion said and how often it ran.
// Every completion must run exactly once (it is how the caller learns the
// buffer is theirs again), so the destructor fails the test for one that
// ran never or twice: declare a Ledger before the group whose requests it
// records, so that it outlives the engines' last completions.
class Ledger {
 public:
  struct Entry {
    int calls = 0;
    Status status;
    int source = -2;
  };

  explicit Ledger(size_t requests) : entries_(requests) {}
  ~Ledger() {
    for (size_t i = 0; i < entries_.size(); ++i) {
      EXPECT_EQ(entries_[i].calls, 1) << "the completion of request #" << i << " must run exactly once";
    }
  }
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  // completion is request #i's Completion.
  Completion completion(size_t i) {
    return [this, i](const Status& status, int source) {
      std::lock_guard<std::mutex> lock(mu_);
      Entry& e = entries_[i];
      ++e.calls;
      e.status = status;
      e.source = source;
      order_.push_back(i);
      changed_.notify_all();
    };
  }

  // wait_for waits until request #i completed; false if `deadline` came first.
  bool wait_for(size_t i, Deadline deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_until(lock, deadline.when(), [&] { return entries_[i].calls > 0; });
  }

  Entry entry(size_t i) const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_[i];
  }

  // order lists the requests in the order they completed.
  std::vector<size_t> order() const {
    std::lock_guard<std::mutex> lock(mu_);
    return order_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<Entry> entries_;
  std::vector<size_t> order_;
};

TEST(Engine, MessagesBetweenTwoRanksArriveInTheOrderTheyWereSent) {
  // Tags repeat with other sizes: a receive matched out of order would see
  // a size it does not expect, or another message's bytes.
  constexpr size_t kMessages = 60;
  const size_t sizes[] = {0, 1, 24, 1000, 4093, 65536, 7};
  std::vector<std::vector<uint8_t>> sent, received;
  std::vector<SendRequest> sends;
  for (size_t i = 0; i < kMessages; ++i) {
    sent.push_back(pattern(sizes[i % 7], i));
    received.emplace_back(sizes[i % 7]);
  }
  for (size_t i = 0; i < kMessages; ++i) sends.push_back({0, kP2p, i % 4, sent[i].data(), sent[i].size()});

  const std::string what = "irecv";
  Ledger ledger(kMessages);
  // A small pipe that moves at most 1000 bytes a call: the larger messages
  // cross in dozens of pieces, and now and then a header in two.
  MemoryGroup group = memory_group(2, MemoryPipeOptions{3000, 1000});
  Engine& receiver = group.engine(0);
  for (size_t i = 0; i < kMessages; ++i) {
    receiver.post_recv({1, kP2p, i % 4, received[i].data(), received[i].size()}, generous(), &what,
                       ledger.completion(i));
  }
  auto sender = std::async(std::launch::async, [&] {
    return group.engine(1).exchange(sends.data(), sends.size(), nullptr, 0, generous(), "isends");
  });
  drive(receiver);
  const Status sent_status = sender.get();

  EXPECT_TRUE(sent_status.ok()) << sent_status.message();
  std::vector<size_t> posting_order(kMessages);
  std::iota(posting_order.begin(), posting_order.end(), size_t{0});
  EXPECT_EQ(ledger.order(), posting_order);
  for (size_t i = 0; i < kMessages; ++i) {
    const Ledger::Entry e = ledger.entry(i);
    EXPECT_TRUE(e.status.ok()) << "message " << i << ": " << e.status.message();
    EXPECT_EQ(e.source, 1) << "message " << i;
    EXPECT_TRUE(received[i] == sent[i]) << "message " << i << " arrived with other bytes";
  }
  EXPECT_GT(group.pipe(0, 1).writes_from(1), 2 * kMessages) << "the messages should have crossed in pieces";
}

TEST(Engine, AnAnySourceReceiveTakesAMessageOfAnyPeerAndNamesItsSender) {
  const std::string what = "irecv from any";
  Ledger ledger(2);
  MemoryGroup group = memory_group(3);
  const std::vector<uint8_t> from2 = pattern(100, 2), from1 = pattern(100, 1);
  std::vector<uint8_t> got(100);

  group.engine(2).post_send({0, kP2p, 9, from2.data(), from2.size()}, generous(), &what,
                            ledger.completion(0));
  group.engine(0).post_recv({kAnySource, kP2p, 9, got.data(), got.size()}, generous(), &what,
                            ledger.completion(1));
  ASSERT_TRUE(pump(group));
  const Ledger::Entry e = ledger.entry(1);
  EXPECT_TRUE(e.status.ok()) << e.status.message();
  EXPECT_EQ(e.source, 2);
  EXPECT_EQ(got, from2);

  // Through exchange, the request itself says who sent it. Rank 1's send
  // fits the pipe, so rank 0 can wait for it alone.
  SendRequest send{0, kP2p, 9, from1.data(), from1.size()};
  const Status sent = group.engine(1).exchange(&send, 1, nullptr, 0, generous(), "isend");
  ASSERT_TRUE(sent.ok()) << sent.message();
  RecvRequest recv{kAnySource, kP2p, 9, got.data(), got.size()};
  const Status st = group.engine(0).exchange(nullptr, 0, &recv, 1, generous(), "irecv from any");
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(recv.source, 1);
  EXPECT_EQ(got, from1);
}

TEST(Engine, MessagesThatComeBeforeTheirReceiveWaitAsideUntilItIsPosted) {
  const std::string what = "irecv";
  Ledger ledger(8);
  MemoryGroup group = memory_group(2);
  Engine& e0 = group.engine(0);
  Engine& e1 = group.engine(1);
  const std::vector<uint8_t> a = pattern(10, 1), b = pattern(5000, 2), empty, marker = pattern(8, 4);
  std::vector<uint8_t> got_a(a.size()), got_b(b.size()), got_empty, got_marker(marker.size());

  // Rank 1 sends tags 1, 2, 3, then 4; rank 0 waits for 4 alone, so the
  // three before it, read first, have no receive yet.
  e1.post_send({0, kP2p, 1, a.data(), a.size()}, generous(), &what, ledger.completion(0));
  e1.post_send({0, kP2p, 2, b.data(), b.size()}, generous(), &what, ledger.completion(1));
  e1.post_send({0, kP2p, 3, empty.data(), 0}, generous(), &what, ledger.completion(2));
  e1.post_send({0, kP2p, 4, marker.data(), marker.size()}, generous(), &what, ledger.completion(3));
  e0.post_recv({1, kP2p, 4, got_marker.data(), got_marker.size()}, generous(), &what, ledger.completion(4));
  ASSERT_TRUE(pump(group));
  ASSERT_TRUE(ledger.entry(4).status.ok()) << ledger.entry(4).status.message();
  EXPECT_EQ(got_marker, marker);
  EXPECT_EQ(group.pipe(0, 1).queued_from(1), 0u) << "rank 0 has read all four";

  // Posted now, in another order than sent, each is matched by its tag and
  // completes at once, from what waited aside.
  e0.post_recv({1, kP2p, 3, got_empty.data(), 0}, generous(), &what, ledger.completion(5));
  EXPECT_EQ(ledger.entry(5).calls, 1);
  e0.post_recv({1, kP2p, 2, got_b.data(), got_b.size()}, generous(), &what, ledger.completion(6));
  EXPECT_EQ(ledger.entry(6).calls, 1);
  e0.post_recv({1, kP2p, 1, got_a.data(), got_a.size()}, generous(), &what, ledger.completion(7));
  EXPECT_EQ(ledger.entry(7).calls, 1);
  EXPECT_FALSE(e0.has_pending());

  for (size_t i = 0; i < 8; ++i)
    EXPECT_TRUE(ledger.entry(i).status.ok()) << i << ": " << ledger.entry(i).status.message();
  for (size_t i = 5; i < 8; ++i) EXPECT_EQ(ledger.entry(i).source, 1);
  EXPECT_EQ(got_a, a);
  EXPECT_EQ(got_b, b);
}

TEST(Engine, AReceivePostedWhileItsMessageArrivesTakesOverTheBytesAlreadyIn) {
  const std::string what = "irecv";
  Ledger ledger(2);
  MemoryGroup group = memory_group(2, MemoryPipeOptions{64 * 1024, SIZE_MAX});
  Engine& e0 = group.engine(0);
  Engine& e1 = group.engine(1);
  const std::vector<uint8_t> big = pattern(1 << 20, 5);
  std::vector<uint8_t> got(big.size());

  e1.post_send({0, kP2p, 6, big.data(), big.size()}, generous(), &what, ledger.completion(0));
  ASSERT_EQ(ledger.entry(0).calls, 0) << "a mebibyte cannot have gone through a 64 KiB pipe";
  // Rank 0 takes in what is there with no receive posted: the header and
  // the first bytes of the payload go to a buffer aside.
  const Status health = e0.poll_health();
  ASSERT_TRUE(health.ok()) << health.message();
  EXPECT_EQ(group.pipe(0, 1).queued_from(1), 0u) << "rank 0 has read all there was";

  e0.post_recv({1, kP2p, 6, got.data(), got.size()}, generous(), &what, ledger.completion(1));
  EXPECT_EQ(ledger.entry(1).calls, 0) << "most of the message is still to come";
  ASSERT_TRUE(pump(group));
  for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(ledger.entry(i).status.ok()) << ledger.entry(i).status.message();
  EXPECT_EQ(ledger.entry(1).source, 1);
  EXPECT_TRUE(got == big) << "the bytes that came before the receive, or after, were lost or misplaced";
}

TEST(Engine, AMessageOfAnotherSizeThanItsReceiveIsADesyncSayingSizesDiffer) {
  for (bool posted_first : {true, false}) {
    SCOPED_TRACE(posted_first ? "the receive posted first" : "the message waiting aside first");
    const std::string what = "recv #2";
    Ledger ledger(2);
    MemoryGroup group = memory_group(2);
    Engine& e0 = group.engine(0);
    const std::vector<uint8_t> sent = pattern(100, 1);
    std::vector<uint8_t> got(64);

    group.engine(1).post_send({0, kP2p, 5, sent.data(), sent.size()}, generous(), &what,
                              ledger.completion(0));
    if (!posted_first) {
      ASSERT_TRUE(e0.poll_health().ok());  // the whole message waits aside
    }
    e0.post_recv({1, kP2p, 5, got.data(), got.size()}, generous(), &what, ledger.completion(1));
    ASSERT_TRUE(pump(group));

    const Status st = ledger.entry(1).status;
    EXPECT_EQ(st.code(), StatusCode::kDesync) << st.message();
    EXPECT_TRUE(says(st, "rank 1 (memory:1) sent 100 bytes but this rank expected 64 in recv #2"));
    EXPECT_TRUE(says(st, "sizes differ"));
    EXPECT_EQ(e0.poll_health().code(), StatusCode::kDesync) << "a desync ends the group";
  }
}

TEST(Engine, ACollectiveMessageOfAnotherSequenceNumberIsADesync) {
  const std::string what = "all_reduce #6";
  Ledger ledger(2);
  MemoryGroup group = memory_group(2);
  const std::vector<uint8_t> sent = pattern(16, 7);
  std::vector<uint8_t> got(16);

  group.engine(1).post_send({0, kCollective, collective_tag(7, 0), sent.data(), sent.size()}, generous(),
                            &what, ledger.completion(0));
  group.engine(0).post_recv({1, kCollective, collective_tag(6, 0), got.data(), got.size()}, generous(), &what,
                            ledger.completion(1));
  ASSERT_TRUE(pump(group));

  const Status st = ledger.entry(1).status;
  EXPECT_EQ(st.code(), StatusCode::kDesync) << st.message();
  EXPECT_TRUE(says(st, "called different collectives"));
  EXPECT_TRUE(
      says(st, "sent collective #7 step 0 while this rank expected collective #6 step 0 in all_reduce #6"));
}

TEST(Engine, AnotherStepOfTheSameCollectiveIsOnlyEarlyAndWaitsAside) {
  const std::string what = "all_gather #6";
  Ledger ledger(4);
  MemoryGroup group = memory_group(2);
  Engine& e0 = group.engine(0);
  Engine& e1 = group.engine(1);
  const std::vector<uint8_t> step0 = pattern(16, 0), step1 = pattern(16, 1);
  std::vector<uint8_t> got0(16), got1(16);

  e1.post_send({0, kCollective, collective_tag(6, 1), step1.data(), step1.size()}, generous(), &what,
               ledger.completion(0));
  e1.post_send({0, kCollective, collective_tag(6, 0), step0.data(), step0.size()}, generous(), &what,
               ledger.completion(1));
  e0.post_recv({1, kCollective, collective_tag(6, 0), got0.data(), got0.size()}, generous(), &what,
               ledger.completion(2));
  ASSERT_TRUE(pump(group));
  e0.post_recv({1, kCollective, collective_tag(6, 1), got1.data(), got1.size()}, generous(), &what,
               ledger.completion(3));
  EXPECT_EQ(ledger.entry(3).calls, 1) << "step 1 waited aside";
  for (size_t i = 0; i < 4; ++i)
    EXPECT_TRUE(ledger.entry(i).status.ok()) << i << ": " << ledger.entry(i).status.message();
  EXPECT_EQ(got0, step0);
  EXPECT_EQ(got1, step1);
}

TEST(Engine, AReceiveNothingAnswersTimesOutAtItsDeadlineNamingWhatItWaitsFor) {
  MemoryGroup group = memory_group(2);
  std::vector<uint8_t> got(8);
  RecvRequest recv{1, kCollective, collective_tag(3, 0), got.data(), got.size()};

  const auto start = Clock::now();
  const Status st =
      group.engine(0).exchange(nullptr, 0, &recv, 1, Deadline::after(milliseconds(200)), "all_reduce #3");
  const auto waited = Clock::now() - start;

  EXPECT_EQ(st.code(), StatusCode::kTimeout) << st.message();
  EXPECT_TRUE(says(st, "all_reduce #3: Timed out (still waiting"));
  EXPECT_TRUE(says(st, "still waiting to receive from ranks [1]"));
  EXPECT_GE(waited, milliseconds(200));
  EXPECT_LT(waited, milliseconds(5000));
}

TEST(Engine, AReceiveThatTimesOutWhileAMessageOfAnotherTagWaitsNamesBothTags) {
  MemoryGroup group = memory_group(2);
  const std::vector<uint8_t> sent = pattern(8, 6);
  std::vector<uint8_t> got(8);
  SendRequest send{0, kP2p, 6, sent.data(), sent.size()};
  ASSERT_TRUE(group.engine(1).exchange(&send, 1, nullptr, 0, generous(), "send to rank 0").ok());

  RecvRequest recv{1, kP2p, 5, got.data(), got.size()};
  const Status st =
      group.engine(0).exchange(nullptr, 0, &recv, 1, Deadline::after(milliseconds(200)), "recv from rank 1");
  EXPECT_EQ(st.code(), StatusCode::kDesync) << st.message();
  EXPECT_TRUE(says(st, "rank 1 (memory:1) sent a message with tag 6 (8 bytes) that no receive matched"));
  EXPECT_TRUE(says(st, "this rank waited for tag 5 (8 bytes)"));
}

TEST(Engine, ALinkCutInTheMiddleOfAMessageFailsTheReceivesNamingIt) {
  const std::string what = "irecv";
  Ledger ledger(3);
  MemoryGroup group = memory_group(2);
  Engine& e0 = group.engine(0);
  // Rank 1's stream stops 1000 bytes into the payload of its first message.
  group.pipe(0, 1).cut_after(1, sizeof(FrameHeader) + 1000);
  const std::vector<uint8_t> big = pattern(64 * 1024, 3);
  std::vector<uint8_t> got(big.size()), later(8);

  group.engine(1).post_send({0, kP2p, 1, big.data(), big.size()}, generous(), &what, ledger.completion(0));
  e0.post_recv({1, kP2p, 1, got.data(), got.size()}, generous(), &what, ledger.completion(1));
  e0.post_recv({1, kP2p, 2, later.data(), later.size()}, generous(), &what, ledger.completion(2));
  ASSERT_TRUE(pump(group));

  EXPECT_TRUE(ledger.entry(0).status.ok()) << "the sender saw its bytes leave";
  for (size_t i : {size_t{1}, size_t{2}}) {
    const Status st = ledger.entry(i).status;
    EXPECT_EQ(st.code(), StatusCode::kNetworkError) << st.message();
    EXPECT_TRUE(says(st, "rank 1 (memory:1) closed its connection in the middle of a message"));
  }
  EXPECT_EQ(e0.lost_peers(), std::vector<int>{1});
}

TEST(Engine, APeerThatClosesBetweenMessagesFailsTheReceiveThatWaitsForIt) {
  const std::string what = "irecv";
  Ledger ledger(3);
  MemoryGroup group = memory_group(2);
  Engine& e0 = group.engine(0);
  const std::vector<uint8_t> first = pattern(32, 1);
  std::vector<uint8_t> got_first(32), got_second(32);

  group.engine(1).post_send({0, kP2p, 1, first.data(), first.size()}, generous(), &what,
                            ledger.completion(0));
  ASSERT_TRUE(pump(group));
  e0.post_recv({1, kP2p, 1, got_first.data(), got_first.size()}, generous(), &what, ledger.completion(1));
  e0.post_recv({1, kP2p, 2, got_second.data(), got_second.size()}, generous(), &what, ledger.completion(2));
  // Rank 0 waits on a thread of its own (asleep in poll(2) once its spin
  // ends); rank 1's process "exits" once the first message is in, so its
  // end must wake rank 0.
  std::thread waiter([&] { drive(e0); });
  const bool first_in = ledger.wait_for(1, generous());
  group.pipe(0, 1).close(1);
  waiter.join();

  ASSERT_TRUE(first_in);
  EXPECT_TRUE(ledger.entry(1).status.ok()) << ledger.entry(1).status.message();
  EXPECT_EQ(got_first, first);
  const Status st = ledger.entry(2).status;
  EXPECT_EQ(st.code(), StatusCode::kNetworkError) << st.message();
  EXPECT_TRUE(says(st, "rank 1 (memory:1) closed its connection (the peer process exited or was killed)"));
  EXPECT_EQ(st.message().find("in the middle"), std::string::npos) << st.message();
  EXPECT_EQ(e0.lost_peers(), std::vector<int>{1});
  EXPECT_TRUE(e0.peer_gone(1));
}

TEST(Engine, APeerThatLeftIsNoErrorUntilARequestNeedsIt) {
  const std::string what = "irecv";
  Ledger ledger(1);
  MemoryGroup group = memory_group(3);
  Engine& e0 = group.engine(0);
  group.pipe(0, 2).close(2);

  const Status health = e0.poll_health();
  EXPECT_TRUE(health.ok()) << "rank 2 may have left after doing its part: " << health.message();
  EXPECT_TRUE(e0.peer_gone(2));
  EXPECT_FALSE(e0.peer_gone(1));
  EXPECT_EQ(e0.lost_peers(), std::vector<int>{2});

  // Rank 1 is still there to talk to.
  const std::vector<uint8_t> sent = pattern(8, 1);
  std::vector<uint8_t> got(8);
  SendRequest send{0, kP2p, 1, sent.data(), sent.size()};
  ASSERT_TRUE(group.engine(1).exchange(&send, 1, nullptr, 0, generous(), "send to rank 0").ok());
  RecvRequest recv{1, kP2p, 1, got.data(), got.size()};
  const Status from1 = e0.exchange(nullptr, 0, &recv, 1, generous(), "recv from rank 1");
  EXPECT_TRUE(from1.ok()) << from1.message();
  EXPECT_EQ(got, sent);

  // A receive from rank 2 fails at once, naming why.
  e0.post_recv({2, kP2p, 1, got.data(), got.size()}, generous(), &what, ledger.completion(0));
  EXPECT_EQ(ledger.entry(0).calls, 1);
  const Status st = ledger.entry(0).status;
  EXPECT_EQ(st.code(), StatusCode::kNetworkError) << st.message();
  EXPECT_TRUE(says(st, "rank 2 (memory:2) closed its connection"));
}

TEST(Engine, ABrokenLinkFailsWhatWaitsOnItNamingTheError) {
  const std::string what = "irecv";
  Ledger ledger(1);
  MemoryGroup group = memory_group(2);
  std::vector<uint8_t> got(8);

  group.engine(0).post_recv({1, kP2p, 1, got.data(), got.size()}, generous(), &what, ledger.completion(0));
  group.pipe(0, 1).break_pipe(ECONNRESET);
  ASSERT_TRUE(pump(group));

  const Status st = ledger.entry(0).status;
  EXPECT_EQ(st.code(), StatusCode::kNetworkError) << st.message();
  EXPECT_TRUE(
      says(st, std::string("rank 1 (memory:1) is gone: receiving failed with ") + std::strerror(ECONNRESET)));
  EXPECT_EQ(group.engine(0).lost_peers(), std::vector<int>{1});
}

TEST(Engine, AFailureOnOneRankFailsItsPeersExchangeWithTheSameReason) {
  MemoryGroup group = memory_group(2);
  std::vector<uint8_t> got(8);
  auto waiting = std::async(std::launch::async, [&] {
    RecvRequest recv{0, kCollective, collective_tag(7, 0), got.data(), got.size()};
    return group.engine(1).exchange(nullptr, 0, &recv, 1, generous(), "all_reduce #7");
  });

  const Status reason(StatusCode::kTimeout, "the watchdog gave up on all_reduce #7 after 600 s");
  group.engine(0).interrupt(reason);
  // poll_health takes the interrupt in: rank 0 fails and tells its peers why.
  const Status own = group.engine(0).poll_health();
  EXPECT_EQ(own.code(), StatusCode::kTimeout);
  EXPECT_EQ(own.message(), reason.message());

  const Status relayed = waiting.get();
  EXPECT_EQ(relayed.code(), StatusCode::kTimeout) << relayed.message();
  EXPECT_TRUE(says(relayed, "the watchdog gave up on all_reduce #7 after 600 s (reported by rank 0)"));
  EXPECT_TRUE(says(relayed, "rank 1 was itself still waiting to receive from ranks [0]"));
  // The cause came as fields, to be relayed on as they are.
  ASSERT_NE(relayed.cause(), nullptr);
  EXPECT_EQ(relayed.cause()->origin, 0);
  EXPECT_EQ(relayed.cause()->text, reason.message());
  ASSERT_EQ(relayed.cause()->waits.size(), 1u);
  EXPECT_EQ(relayed.cause()->waits[0].rank, 1);
  EXPECT_TRUE(group.engine(1).lost_peers().empty()) << "a peer that said why it failed is not taken for lost";
}

// Series is a pipelined receive's state: the segments that came, and two
// buffers that carry them in turn.
struct Series {
  static constexpr size_t kSegment = 1000;
  static constexpr uint64_t kSequence = 3;
  size_t wanted = 0;
  std::vector<std::vector<uint8_t>> segments;
  std::vector<uint64_t> tags;
  uint8_t buffers[2][kSegment] = {};
};

// take_segment is the pipelined receive's on_arrival: it keeps the
// segment, then posts the receive again for the next step into the other
// buffer, until `wanted` came.
bool take_segment(void* context, RecvRequest& request) {
  auto& series = *static_cast<Series*>(context);
  const auto* data = static_cast<const uint8_t*>(request.data);
  series.segments.emplace_back(data, data + request.bytes);
  series.tags.push_back(request.tag);
  const size_t next = series.segments.size();
  if (next == series.wanted) return false;
  request.tag = collective_tag(Series::kSequence, next);
  request.data = series.buffers[next % 2];
  return true;
}

TEST(Engine, AReceiveThatPostsItselfAgainOnArrivalTakesASeriesOfSegments) {
  constexpr size_t kSegments = 24;
  std::vector<std::vector<uint8_t>> sent;
  std::vector<SendRequest> sends;
  for (size_t i = 0; i < kSegments; ++i) sent.push_back(pattern(Series::kSegment, 100 + i));
  for (size_t i = 0; i < kSegments; ++i) {
    sends.push_back({0, kCollective, collective_tag(Series::kSequence, i), sent[i].data(), Series::kSegment});
  }
  // A pipe smaller than the series: segments arrive while earlier ones are taken.
  MemoryGroup group = memory_group(2, MemoryPipeOptions{4096, 700});
  auto sender = std::async(std::launch::async, [&] {
    return group.engine(1).exchange(sends.data(), sends.size(), nullptr, 0, generous(), "reduce_scatter #3");
  });
  Series series;
  series.wanted = kSegments;
  RecvRequest recv{1, kCollective, collective_tag(Series::kSequence, 0), series.buffers[0], Series::kSegment};
  recv.on_arrival = take_segment;
  recv.context = &series;
  const Status st = group.engine(0).exchange(nullptr, 0, &recv, 1, generous(), "reduce_scatter #3");
  const Status sender_st = sender.get();

  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(sender_st.ok()) << sender_st.message();
  ASSERT_EQ(series.segments.size(), kSegments);
  for (size_t i = 0; i < kSegments; ++i) {
    EXPECT_EQ(series.tags[i], collective_tag(Series::kSequence, i));
    EXPECT_TRUE(series.segments[i] == sent[i]) << "segment " << i << " arrived with other bytes";
  }
  EXPECT_EQ(recv.source, 1);
  EXPECT_EQ(recv.tag, collective_tag(Series::kSequence, kSegments - 1))
      << "the request as the last arrival left it";
}

TEST(Engine, TwoRanksSendingEachOtherMoreThanThePipeHoldsDoNotDeadlock) {
  MemoryGroup group = memory_group(2, MemoryPipeOptions{64 * 1024, SIZE_MAX});
  const size_t bytes = size_t{1} << 20;
  const std::vector<uint8_t> out[2] = {pattern(bytes, 10), pattern(bytes, 11)};
  std::vector<uint8_t> in[2] = {std::vector<uint8_t>(bytes), std::vector<uint8_t>(bytes)};
  auto run = [&](int r) {
    const int peer = 1 - r;
    SendRequest send{peer, kCollective, collective_tag(1, 0), out[r].data(), bytes};
    RecvRequest recv{peer, kCollective, collective_tag(1, 0), in[r].data(), bytes};
    return group.engine(r).exchange(&send, 1, &recv, 1, generous(), "all_to_all #1");
  };
  auto one = std::async(std::launch::async, run, 1);
  const Status zero_st = run(0);
  const Status one_st = one.get();
  EXPECT_TRUE(zero_st.ok()) << zero_st.message();
  EXPECT_TRUE(one_st.ok()) << one_st.message();
  EXPECT_TRUE(in[0] == out[1]);
  EXPECT_TRUE(in[1] == out[0]);
}

TEST(Engine, EveryCompletionRunsOnceAlsoWhenTheEngineIsDestroyedWithRequestsPending) {
  const std::string what = "isend/irecv";
  Ledger ledger(5);  // outlives the group: the destructor's completions land in it
  MemoryGroup group = memory_group(2, MemoryPipeOptions{4096, SIZE_MAX});
  Engine& e0 = group.engine(0);
  Engine& e1 = group.engine(1);
  const std::vector<uint8_t> big = pattern(1 << 20, 1), answer = pattern(8, 2);
  std::vector<uint8_t> got1(8), got2(8), got_any(8);

  // Rank 1 answers one of rank 0's three receives, and never reads what
  // rank 0 sends it.
  e1.post_send({0, kP2p, 10, answer.data(), answer.size()}, generous(), &what, ledger.completion(0));
  e0.post_send({1, kP2p, 1, big.data(), big.size()}, generous(), &what, ledger.completion(1));
  e0.post_recv({1, kP2p, 10, got1.data(), got1.size()}, generous(), &what, ledger.completion(2));
  e0.post_recv({1, kP2p, 11, got2.data(), got2.size()}, generous(), &what, ledger.completion(3));
  e0.post_recv({kAnySource, kP2p, 12, got_any.data(), got_any.size()}, generous(), &what,
               ledger.completion(4));
  const Deadline deadline = generous();
  while (e1.has_pending() && !deadline.expired()) turn(e1);
  while (ledger.entry(2).calls == 0 && !deadline.expired()) turn(e0);
  ASSERT_EQ(ledger.entry(2).calls, 1);
  EXPECT_TRUE(e0.has_pending());
  for (size_t i : {size_t{1}, size_t{3}, size_t{4}}) EXPECT_EQ(ledger.entry(i).calls, 0) << "request #" << i;

  group.engines[0].reset();

  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(ledger.entry(i).calls, 1) << "request #" << i;
  EXPECT_TRUE(ledger.entry(0).status.ok()) << ledger.entry(0).status.message();
  EXPECT_TRUE(ledger.entry(2).status.ok()) << ledger.entry(2).status.message();
  EXPECT_EQ(ledger.entry(2).source, 1);
  EXPECT_EQ(got1, answer);
  for (size_t i : {size_t{1}, size_t{3}, size_t{4}}) {
    const Status st = ledger.entry(i).status;
    EXPECT_EQ(st.code(), StatusCode::kNetworkError) << "request #" << i << ": " << st.message();
    EXPECT_TRUE(says(st, "the group was destroyed with this operation pending")) << "request #" << i;
  }
}

TEST(Engine, AfterAnInterruptEveryPendingAndLaterRequestFailsWithItsReasonOnce) {
  const std::string what = "isend/irecv";
  Ledger ledger(4);
  MemoryGroup group = memory_group(2, MemoryPipeOptions{4096, SIZE_MAX});
  Engine& e0 = group.engine(0);
  const std::vector<uint8_t> big = pattern(1 << 20, 1);
  std::vector<uint8_t> got(8);

  e0.post_send({1, kP2p, 1, big.data(), big.size()}, generous(), &what,
               ledger.completion(0));  // waits for room
  e0.post_recv({1, kP2p, 2, got.data(), got.size()}, generous(), &what, ledger.completion(1));
  const Status reason(StatusCode::kDesync, "the ranks disagree on the collective to run");
  std::thread([&] { e0.interrupt(reason); }).join();  // from another thread, as abort() is
  e0.progress(generous());
  EXPECT_FALSE(e0.has_pending());

  // Requests posted afterwards fail at once with the same reason.
  e0.post_recv({1, kP2p, 3, got.data(), got.size()}, generous(), &what, ledger.completion(2));
  e0.post_send({1, kP2p, 4, big.data(), 8}, generous(), &what, ledger.completion(3));
  for (size_t i = 0; i < 4; ++i) {
    const Ledger::Entry e = ledger.entry(i);
    EXPECT_EQ(e.calls, 1) << "request #" << i;
    EXPECT_EQ(e.status.code(), StatusCode::kDesync) << "request #" << i;
    EXPECT_EQ(e.status.message(), reason.message()) << "request #" << i;
  }
}

}  // namespace
}  // namespace cohort
