// Work's contract (completes once, callbacks once, futures, wait timeouts),
// several groups at once, joining, and the module-level API's checks.
#include <gtest/gtest.h>

#include <atomic>

#include "cohort/errors.h"
#include "cohort/hash_store.h"
#include "cohort/prefix_store.h"
#include "process_group/thread_ranks.h"

namespace cohort {
// WorkTestPeer completes a Work by hand, as only a ProcessGroup may.
struct WorkTestPeer {
  static void complete(Work& w, std::exception_ptr error, int source_rank = -1) { w.complete(error, source_rank); }
};
}  // namespace cohort

namespace cohort::testing {
namespace {

TEST(WorkTest, CompletesOnceAndRunsEveryCallbackOnce) {
  Work w("test op");
  std::atomic<int> calls{0};
  w.then([&](Work& done) {
    EXPECT_TRUE(done.is_success());
    calls++;
  });
  auto future = w.get_future();
  EXPECT_FALSE(w.is_completed());
  WorkTestPeer::complete(w, nullptr, 3);
  WorkTestPeer::complete(w, std::make_exception_ptr(NetworkError("late")));  // ignored
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(w.is_success());
  EXPECT_EQ(w.source_rank(), 3);
  EXPECT_NO_THROW(future.get());
  // A callback added after completion runs at once, once.
  w.then([&](Work&) { calls++; });
  EXPECT_EQ(calls.load(), 2);
}

TEST(WorkTest, ErrorsReachWaitFutureAndCallbacks) {
  Work w("failing op");
  std::atomic<int> saw_error{0};
  w.then([&](Work& done) { saw_error += done.exception() != nullptr; });
  WorkTestPeer::complete(w, std::make_exception_ptr(TimeoutError("too slow")));
  EXPECT_THROW(w.wait(), TimeoutError);
  EXPECT_THROW(w.get_future().get(), TimeoutError);
  EXPECT_FALSE(w.is_success());
  EXPECT_EQ(saw_error.load(), 1);
}

TEST(WorkTest, WaitWithATimeoutNamesTheOperation) {
  run_ranks(2, [](ProcessGroup& g) {
    if (g.rank() == 0) {
      int32_t v = 0;
      auto w = g.irecv(Buffer::of(&v, 1), 1, 5);
      try {
        w->wait(std::chrono::milliseconds(100));
        ADD_FAILURE() << "returned before the send";
      } catch (const TimeoutError& e) {
        EXPECT_NE(std::string(e.what()).find("recv from 1 tag 5"), std::string::npos) << e.what();
      }
      g.barrier();  // now rank 1 sends
      w->wait();
      EXPECT_EQ(v, 42);
    } else {
      g.barrier();
      int32_t v = 42;
      g.send(Buffer::of(&v, 1), 0, [] {
        P2POptions o;
        o.tag = 5;
        return o;
      }());
    }
  });
}

TEST(WorkTest, CallbacksOfWorkStillQueuedRunWhenTheGroupIsDestroyed) {
  std::atomic<int> callbacks{0};
  run_ranks(2, [&](ProcessGroup& g) {
    if (g.rank() == 1) {
      int32_t v = 0;
      // Never matched: the group goes away with it pending.
      g.irecv(Buffer::of(&v, 1), 0, 99)->then([&](Work& w) {
        EXPECT_NE(w.exception(), nullptr);
        callbacks++;
      });
    }
    g.barrier();
  });
  EXPECT_EQ(callbacks.load(), 1);
}

TEST(GroupsTest, TwoGroupsRunConcurrentlyWithTheirOwnSequenceNumbers) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::thread> ranks;
  std::vector<std::string> errors(3);
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      try {
        auto a = make_group(std::make_shared<PrefixStore>("a", store), r, 3, std::chrono::seconds(60), "a");
        auto b = make_group(std::make_shared<PrefixStore>("b", store), r, 3, std::chrono::seconds(60), "b");
        // Each group is driven by its own thread at the same time.
        std::thread other([&] {
          for (int i = 0; i < 50; ++i) {
            std::vector<float> v(1000, 1.0f);
            b->all_reduce(Buffer::of(v));
            if (v[0] != 3.0f) errors[r] = "group b summed wrong";
          }
        });
        for (int i = 0; i < 20; ++i) {
          std::vector<int64_t> v(100000, r);
          a->all_reduce(Buffer::of(v));
          if (v[0] != 3) errors[r] = "group a summed wrong";
        }
        other.join();
        if (a->sequence_number() != 20 || b->sequence_number() != 50) errors[r] = "sequence numbers mixed up";
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(GroupsTest, JoiningNamesTheRanksThatNeverArrived) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::thread> ranks;
  std::vector<std::string> errors(2);
  for (int r = 0; r < 2; ++r) {  // ranks 2 and 3 of 4 never come
    ranks.emplace_back([&, r] {
      try {
        make_group(store, r, 4, std::chrono::milliseconds(300));
      } catch (const TimeoutError& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (const auto& e : errors) EXPECT_NE(e.find("ranks [2, 3] never arrived"), std::string::npos) << e;
}

TEST(ModuleApiTest, ChecksItsState) {
  EXPECT_FALSE(is_initialized());
  EXPECT_THROW(get_rank(), InvalidArgument);
  InitOptions o;
  o.backend = "carrier-pigeon";
  o.store = std::make_shared<HashStore>();
  o.rank = 0;
  o.world_size = 1;
  EXPECT_THROW(init_process_group(o), InvalidArgument);
  o.backend = "cohort";
  o.rank = 1;
  EXPECT_THROW(init_process_group(o), InvalidArgument) << "rank 1 of world size 1";
  o.rank = 0;
  init_process_group(o);
  EXPECT_TRUE(is_initialized());
  EXPECT_THROW(init_process_group(o), InvalidArgument) << "already initialized";
  EXPECT_EQ(get_rank(), 0);
  EXPECT_EQ(get_world_size(), 1);
  auto g = new_group({0});
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(get_group_rank(g, 0), 0);
  EXPECT_EQ(get_global_rank(g, 0), 0);
  EXPECT_EQ(get_process_group_ranks(g), std::vector<int>{0});
  EXPECT_THROW(get_group_rank(g, 5), InvalidArgument);
  EXPECT_THROW(new_group({0, 0}), InvalidArgument);
  EXPECT_THROW(new_group({3}), InvalidArgument);
  float x = 2;
  all_reduce(Buffer::of(&x, 1));
  EXPECT_EQ(x, 2.0f);
  destroy_process_group();
  EXPECT_FALSE(is_initialized());
}

}  // namespace
}  // namespace cohort::testing

namespace cohort::testing {
namespace {

TEST(MonitoredBarrierTest, PassesWhenAllArriveAndNamesTheRanksThatDoNot) {
  run_ranks(4, [](ProcessGroup& g) { g.monitored_barrier(); });
  std::vector<std::string> errors(4);
  run_ranks(4, [&](ProcessGroup& g) {
    if (g.rank() == 2 || g.rank() == 3) {  // alive but never arrive
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return;
    }
    try {
      BarrierOptions o;
      o.timeout = std::chrono::milliseconds(300);
      g.monitored_barrier(o, /*wait_all_ranks=*/true);
      errors[g.rank()] = "(passed)";
    } catch (const Error& e) {
      errors[g.rank()] = e.what();
    }
  });
  EXPECT_NE(errors[0].find("monitored_barrier of group test: Ranks 2, 3 failed to pass monitoredBarrier in 300 ms"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("(passed)"), 0u) << "rank 1 cannot pass without rank 0's release";
  EXPECT_NE(errors[1].find("Rank 1 successfully reached monitoredBarrier, but received errors while waiting "
                           "for send/recv from rank 0"),
            std::string::npos)
      << errors[1];
}

}  // namespace
}  // namespace cohort::testing
