// The Store conformance suite: torch's store semantics, checked against
// every store cohort has.
#include <gtest/gtest.h>

#include <atomic>
#include <climits>
#include <thread>

#include "cohort/errors.h"
#include "store/store_harness.h"

namespace cohort::testing {
namespace {

using std::chrono::milliseconds;

class StoreConformance : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    harness_ = GetParam().make();
    store_ = harness_->client();
  }
  std::unique_ptr<StoreHarness> harness_;
  std::shared_ptr<Store> store_;
};

TEST_P(StoreConformance, SetThenGetReturnsTheBytes) {
  Bytes binary = {0, 1, 2, 0, 255, 'x'};
  store_->set("bin", binary);
  store_->set("empty", {});
  EXPECT_EQ(store_->get("bin"), binary);
  EXPECT_EQ(store_->get("empty"), Bytes{});
}

TEST_P(StoreConformance, SetReplacesTheValue) {
  store_->set("k", to_bytes("one"));
  store_->set("k", to_bytes("two"));
  EXPECT_EQ(to_string(store_->get("k")), "two");
}

TEST_P(StoreConformance, AnotherClientSeesTheKeys) {
  auto other = harness_->client();
  store_->set("shared", to_bytes("v"));
  EXPECT_EQ(to_string(other->get("shared")), "v");
}

TEST_P(StoreConformance, GetBlocksUntilAnotherClientSetsTheKey) {
  auto other = harness_->client();
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(150));
    other->set("late", to_bytes("here"));
  });
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(to_string(store_->get("late")), "here");
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(100));
  setter.join();
}

TEST_P(StoreConformance, GetTimesOutNamingTheKeyAndTheTimeout) {
  store_->set_timeout(milliseconds(200));
  try {
    store_->get("never-set");
    FAIL() << "get of a missing key returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("never-set"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("200 ms"), std::string::npos) << e.what();
  }
}

TEST_P(StoreConformance, AddStartsAtZeroAndKeepsDecimalText) {
  EXPECT_EQ(store_->add("n", 5), 5);
  EXPECT_EQ(store_->add("n", -7), -2);
  EXPECT_EQ(store_->add("n", 0), -2);
  EXPECT_EQ(to_string(store_->get("n")), "-2");
}

TEST_P(StoreConformance, AddOnTextThatIsNotANumberIsInvalidArgument) {
  store_->set("word", to_bytes("hello"));
  try {
    store_->add("word", 1);
    FAIL() << "add on a non-integer succeeded";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("word"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("hello"), std::string::npos) << e.what();
  }
  EXPECT_EQ(to_string(store_->get("word")), "hello");  // nothing lost
}

TEST_P(StoreConformance, AddWrapsOnOverflowLikeInt64) {
  store_->set("big", to_bytes(std::to_string(LLONG_MAX)));
  EXPECT_EQ(store_->add("big", 1), LLONG_MIN);
}

TEST_P(StoreConformance, CompareSetFollowsTorch) {
  // Absent key, empty expected: set.
  EXPECT_EQ(to_string(store_->compare_set("cs", {}, to_bytes("first"))), "first");
  // Present, matching: set.
  EXPECT_EQ(to_string(store_->compare_set("cs", to_bytes("first"), to_bytes("second"))), "second");
  // Present, not matching: unchanged, returns the current value.
  EXPECT_EQ(to_string(store_->compare_set("cs", to_bytes("nope"), to_bytes("third"))), "second");
  EXPECT_EQ(to_string(store_->get("cs")), "second");
  // Absent, non-empty expected: returns expected, key stays absent.
  EXPECT_EQ(to_string(store_->compare_set("absent", to_bytes("x"), to_bytes("y"))), "x");
  EXPECT_FALSE(store_->check({"absent"}));
}

TEST_P(StoreConformance, CheckIsTrueOnlyWhenEveryKeyExists) {
  store_->set("a", to_bytes("1"));
  EXPECT_TRUE(store_->check({"a"}));
  EXPECT_FALSE(store_->check({"a", "b"}));
  store_->set("b", to_bytes("2"));
  EXPECT_TRUE(store_->check({"a", "b"}));
}

TEST_P(StoreConformance, WaitReturnsOnceEveryKeyIsSet) {
  auto other = harness_->client();
  std::thread setter([&] {
    other->set("w1", to_bytes("1"));
    std::this_thread::sleep_for(milliseconds(100));
    other->set("w2", to_bytes("2"));
  });
  store_->wait({"w1", "w2"}, milliseconds(10000));
  EXPECT_TRUE(store_->check({"w1", "w2"}));
  setter.join();
}

// A key set and deleted again while a reader waits counts as missing: the
// reader is answered only once every key exists at the same time, with
// the values then.
TEST_P(StoreConformance, AKeyDeletedWhileAReaderWaitsIsWaitedForAgain) {
  auto other = harness_->client();
  std::vector<Bytes> got;
  std::thread reader([&] { got = other->multi_get({"d1", "d2"}); });
  std::this_thread::sleep_for(milliseconds(100));  // parked by now, most likely
  store_->set("d1", to_bytes("first"));
  EXPECT_TRUE(store_->delete_key("d1"));
  store_->set("d2", to_bytes("2"));
  std::this_thread::sleep_for(milliseconds(100));
  store_->set("d1", to_bytes("again"));
  reader.join();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(to_string(got[0]), "again");
  EXPECT_EQ(to_string(got[1]), "2");
}

// A compare_set that fails on a missing key sets nothing: a reader
// waiting for that key stays parked, and is answered by the set that
// follows, with that value; one that succeeds on a missing key (empty
// expected) answers the reader like a set.
TEST_P(StoreConformance, AFailedCompareSetOnAMissingKeyDoesNotWakeItsReader) {
  auto other = harness_->client();
  std::vector<Bytes> got;
  std::atomic<bool> answered{false};
  std::thread reader([&] {
    got = other->multi_get({"c1", "c2"});
    answered = true;
  });
  std::this_thread::sleep_for(milliseconds(100));  // parked by now, most likely
  EXPECT_EQ(to_string(store_->compare_set("c1", to_bytes("x"), to_bytes("never"))), "x");
  EXPECT_FALSE(store_->check({"c1"}));
  store_->set("c2", to_bytes("2"));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(answered.load()) << "answered while c1 was still missing";
  EXPECT_EQ(to_string(store_->compare_set("c1", {}, to_bytes("made"))), "made");
  reader.join();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(to_string(got[0]), "made");
  EXPECT_EQ(to_string(got[1]), "2");
}

TEST_P(StoreConformance, AWaitNamingAKeyTwiceReturnsOnceItIsSet) {
  auto other = harness_->client();
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(50));
    other->set("dup", to_bytes("1"));
    other->set("other-dup", to_bytes("2"));
  });
  store_->wait({"dup", "other-dup", "dup"}, milliseconds(10000));
  EXPECT_TRUE(store_->check({"dup", "other-dup"}));
  setter.join();
}

TEST_P(StoreConformance, WaitTimeoutNamesOnlyTheMissingKeys) {
  store_->set("present", to_bytes("1"));
  try {
    store_->wait({"present", "absent-key"}, milliseconds(150));
    FAIL() << "wait returned";
  } catch (const TimeoutError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("absent-key"), std::string::npos) << m;
    EXPECT_EQ(m.find("\"present\""), std::string::npos) << m;
    EXPECT_NE(m.find("150 ms"), std::string::npos) << m;
  }
}

TEST_P(StoreConformance, WaitWithoutTimeoutUsesTheStoreTimeout) {
  store_->set_timeout(milliseconds(120));
  EXPECT_THROW(store_->wait({"nope"}), TimeoutError);
}

TEST_P(StoreConformance, DeleteKeyReportsWhetherItExisted) {
  store_->set("d", to_bytes("1"));
  EXPECT_TRUE(store_->delete_key("d"));
  EXPECT_FALSE(store_->delete_key("d"));
  EXPECT_FALSE(store_->check({"d"}));
}

TEST_P(StoreConformance, NumKeysCountsSetsAndDeletes) {
  int64_t before = store_->num_keys();
  store_->set("n1", to_bytes("1"));
  store_->set("n2", to_bytes("1"));
  store_->set("n2", to_bytes("2"));
  EXPECT_EQ(store_->num_keys(), before + 2);
  store_->delete_key("n1");
  EXPECT_EQ(store_->num_keys(), before + 1);
}

TEST_P(StoreConformance, AppendCreatesThenExtends) {
  store_->append("log", to_bytes("ab"));
  store_->append("log", to_bytes("cd"));
  EXPECT_EQ(to_string(store_->get("log")), "abcd");
}

TEST_P(StoreConformance, MultiSetThenMultiGetInOrder) {
  store_->multi_set({"m1", "m2", "m3"}, {to_bytes("x"), to_bytes(""), to_bytes("z")});
  auto values = store_->multi_get({"m3", "m1", "m2"});
  ASSERT_EQ(values.size(), 3u);
  EXPECT_EQ(to_string(values[0]), "z");
  EXPECT_EQ(to_string(values[1]), "x");
  EXPECT_EQ(to_string(values[2]), "");
}

TEST_P(StoreConformance, MultiSetWithMismatchedListsIsInvalidArgument) {
  EXPECT_THROW(store_->multi_set({"a", "b"}, {to_bytes("1")}), InvalidArgument);
  EXPECT_FALSE(store_->check({"a"}));
}

TEST_P(StoreConformance, MultiGetWaitsForMissingKeys) {
  store_->set_timeout(milliseconds(150));
  store_->set("have", to_bytes("1"));
  EXPECT_THROW(store_->multi_get({"have", "missing"}), TimeoutError);
}

TEST_P(StoreConformance, TimeoutCanBeReadAndChanged) {
  store_->set_timeout(milliseconds(1234));
  EXPECT_EQ(store_->timeout(), milliseconds(1234));
}

TEST_P(StoreConformance, LargeValuesSurviveTheTrip) {
  Bytes big(4 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 131 + 7);
  store_->set("big", big);
  EXPECT_EQ(store_->get("big"), big);
}

TEST_P(StoreConformance, ConcurrentAddsFromManyClientsAreNotLost) {
  constexpr int kThreads = 6;
  constexpr int kAdds = 150;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto c = harness_->client();
      for (int i = 0; i < kAdds; ++i) c->add("counter", 1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store_->add("counter", 0), kThreads * kAdds);
}

TEST_P(StoreConformance, OneClientIsSafeToShareBetweenThreads) {
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        store_->set("t" + std::to_string(t), to_bytes(std::to_string(i)));
        store_->add("shared", 1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store_->add("shared", 0), kThreads * 100);
  EXPECT_EQ(to_string(store_->get("t3")), "99");
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreConformance, ::testing::ValuesIn(all_store_kinds()),
                         [](const ::testing::TestParamInfo<StoreKind>& kind) { return kind.param.name; });

}  // namespace
}  // namespace cohort::testing
