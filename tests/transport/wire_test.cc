// MessageWire (src/transport/wire.h), RPC's carrier, with ranks as threads
// of this process, over shared memory and over TCP: whole messages of any
// size arrive in order, with their bodies where the receiver put them;
// messages to the rank itself are delivered; threads that turn the wire
// themselves (drive_once) while others send do not lose or reorder
// anything; and a wire that stops is reported, naming it, to the others,
// which keep working between themselves.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "cohort/config.h"
#include "cohort/hash_store.h"
#include "transport/wire.h"

namespace cohort {
namespace {

using std::chrono::milliseconds;

// Recorder keeps what a rank received: each message's head as text and its
// body, which it asked to be put in one buffer of the size the head says.
class Recorder : public WireHandler {
 public:
  struct Got {
    int from;
    uint64_t id;
    std::string head;
    std::vector<uint8_t> body;
  };

  Status on_head(int peer, InMessage& m) override {
    (void)peer;
    auto buffer = std::make_shared<std::vector<uint8_t>>(m.header.body_bytes);
    // Two ranges, to check that a body is split across them in order.
    const size_t half = buffer->size() / 2;
    m.body.push_back(iovec{buffer->data(), half});
    m.body.push_back(iovec{buffer->data() + half, buffer->size() - half});
    m.keep_alive = buffer;
    return Status::ok_status();
  }
  void on_message(int peer, InMessage m) override {
    auto* buffer = static_cast<std::vector<uint8_t>*>(m.keep_alive.get());
    std::lock_guard<std::mutex> lock(mu_);
    got_.push_back(Got{peer, m.header.id, std::string(m.head.begin(), m.head.end()), *buffer});
    cv_.notify_all();
  }
  void on_peer_lost(int peer, const Status& why) override {
    std::lock_guard<std::mutex> lock(mu_);
    lost_[peer] = why.message();
    cv_.notify_all();
  }

  // wait_for waits until `n` messages came (or 20 s passed).
  std::vector<Got> wait_for(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(20), [&] { return got_.size() >= n; });
    return got_;
  }
  std::string wait_lost(int peer) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(20), [&] { return lost_.count(peer) > 0; });
    return lost_.count(peer) ? lost_[peer] : "";
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Got> got_;
  std::map<int, std::string> lost_;
};

// Wires of `size` ranks, connected from threads of this process.
struct Wires {
  std::vector<std::unique_ptr<Recorder>> recorders;  // outlive the wires that call them
  std::vector<std::unique_ptr<MessageWire>> wires;
};

Wires connect(int size) {
  auto store = std::make_shared<HashStore>();
  Wires w;
  w.wires.resize(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto wire = MessageWire::connect(*store, r, size, "127.0.0.1", Deadline::after(milliseconds(20000)));
      EXPECT_TRUE(wire.ok()) << wire.status().message();
      if (wire.ok()) w.wires[r] = std::move(wire.value());
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) {
    w.recorders.push_back(std::make_unique<Recorder>());
    if (w.wires[r]) w.wires[r]->start(w.recorders[r].get());
  }
  return w;
}

OutMessage message(uint64_t id, const std::string& head, std::shared_ptr<std::vector<uint8_t>> body) {
  OutMessage m;
  m.type = 7;
  m.id = id;
  m.head.assign(head.begin(), head.end());
  if (body && !body->empty()) m.body.push_back(iovec{body->data(), body->size()});
  m.keep_alive = body;
  return m;
}

std::shared_ptr<std::vector<uint8_t>> shared_pattern(size_t n, uint8_t seed) {
  auto v = std::make_shared<std::vector<uint8_t>>(n);
  for (size_t i = 0; i < n; ++i) (*v)[i] = static_cast<uint8_t>(seed + i * 131);
  return v;
}

class WireOver : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (!GetParam()) set_config("COHORT_SHM", "off");
  }
  void TearDown() override { reset_config("COHORT_SHM"); }
};

// Sizes from empty to several rings' worth, each checked byte for byte
// and in the order sent, both ways at once.
TEST_P(WireOver, MessagesOfEverySizeArriveWholeAndInOrder) {
  Wires w = connect(2);
  ASSERT_TRUE(w.wires[0] && w.wires[1]);
  const std::vector<size_t> sizes{0, 1, 63, 4096, 100000, 1 << 20, (5 << 20) + 3};
  std::vector<std::thread> senders;
  for (int r = 0; r < 2; ++r) {
    senders.emplace_back([&, r] {
      for (size_t i = 0; i < sizes.size(); ++i) {
        Status st = w.wires[r]->send(1 - r, message(i, "head " + std::to_string(i), shared_pattern(sizes[i], r)));
        EXPECT_TRUE(st.ok()) << st.message();
      }
    });
  }
  for (auto& t : senders) t.join();
  for (int r = 0; r < 2; ++r) {
    auto got = w.recorders[r]->wait_for(sizes.size());
    ASSERT_EQ(got.size(), sizes.size()) << "rank " << r;
    for (size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_EQ(got[i].id, i);
      EXPECT_EQ(got[i].from, 1 - r);
      EXPECT_EQ(got[i].head, "head " + std::to_string(i));
      EXPECT_EQ(got[i].body, *shared_pattern(sizes[i], static_cast<uint8_t>(1 - r)))
          << "message " << i << " at rank " << r;
    }
  }
}

TEST_P(WireOver, AMessageToItselfIsDeliveredOnTheSendersThread) {
  Wires w = connect(2);
  ASSERT_TRUE(w.wires[0]);
  ASSERT_TRUE(w.wires[0]->send(0, message(9, "self", shared_pattern(5000, 3))).ok());
  auto got = w.recorders[0]->wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].from, 0);
  EXPECT_EQ(got[0].body, *shared_pattern(5000, 3));
  EXPECT_FALSE(w.wires[0]->send(5, message(1, "", nullptr)).ok()) << "a rank that does not exist";
}

// Threads that turn the wire themselves while others send, as RPC's
// waiting callers and idle workers do: nothing lost, nothing reordered.
TEST_P(WireOver, ThreadsThatTurnTheWireLoseNothing) {
  Wires w = connect(2);
  ASSERT_TRUE(w.wires[0] && w.wires[1]);
  constexpr int kMessages = 2000;
  std::atomic<bool> done{false};
  std::vector<std::thread> drivers;
  for (int r = 0; r < 2; ++r) {
    for (int d = 0; d < 2; ++d) {
      drivers.emplace_back([&, r, d] {
        while (!done.load()) {
          w.wires[r]->enter_driving();
          for (int i = 0; i < 50 && !done.load(); ++i) {
            if (!w.wires[r]->drive_once()) std::this_thread::yield();
          }
          w.wires[r]->leave_driving(d == 0);  // one hands the wire back, one does not
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      });
    }
  }
  std::thread sender([&] {
    for (int i = 0; i < kMessages; ++i) {
      const size_t bytes = i % 7 == 0 ? 70000 : 16;
      EXPECT_TRUE(w.wires[0]->send(1, message(static_cast<uint64_t>(i), "m", shared_pattern(bytes, 1))).ok());
    }
  });
  sender.join();
  auto got = w.recorders[1]->wait_for(kMessages);
  done.store(true);
  for (auto& t : drivers) t.join();
  ASSERT_EQ(got.size(), static_cast<size_t>(kMessages));
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_EQ(got[i].id, static_cast<uint64_t>(i));
    ASSERT_EQ(got[i].body.size(), i % 7 == 0 ? 70000u : 16u);
  }
}

// A wire that stops (its process would have exited) is reported to every
// other rank, naming it; the others go on between themselves.
TEST_P(WireOver, AStoppedWireIsLostNamingItAndTheOthersGoOn) {
  Wires w = connect(3);
  ASSERT_TRUE(w.wires[0] && w.wires[1] && w.wires[2]);
  w.wires[1]->stop();
  for (int r : {0, 2}) {
    const std::string why = w.recorders[r]->wait_lost(1);
    EXPECT_NE(why.find("rank 1 (127.0.0.1:"), std::string::npos) << why;
    EXPECT_NE(why.find("closed its connection"), std::string::npos) << why;
  }
  const Status st = w.wires[0]->send(1, message(1, "late", nullptr));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
  ASSERT_TRUE(w.wires[0]->send(2, message(2, "still here", shared_pattern(3000, 4))).ok());
  auto got = w.recorders[2]->wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].head, "still here");
}

INSTANTIATE_TEST_SUITE_P(SharedMemoryAndTcp, WireOver, ::testing::Values(true, false),
                         [](const auto& p) { return p.param ? "SharedMemory" : "Tcp"; });

}  // namespace
}  // namespace cohort
