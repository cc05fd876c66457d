// The event loop: posted work, timers and readiness, all on its thread.
#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "common/event_loop.h"

namespace cohort {
namespace {

using std::chrono::milliseconds;

TEST(EventLoopTest, PostedClosuresRunOnTheLoopThreadInOrder) {
  EventLoop loop;
  std::thread::id loop_thread;
  std::vector<int> order;
  std::thread t([&] {
    loop_thread = std::this_thread::get_id();
    loop.run();
  });
  std::promise<void> done;
  std::thread::id ran_on;
  for (int i = 0; i < 5; ++i) loop.post([&order, i] { order.push_back(i); });
  loop.post([&] {
    ran_on = std::this_thread::get_id();
    done.set_value();
  });
  done.get_future().wait();
  loop.stop();
  t.join();
  EXPECT_EQ(ran_on, loop_thread);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(EventLoopTest, TimersFireInDeadlineOrderAndCancelledOnesNever) {
  EventLoop loop;
  std::vector<int> fired;
  loop.post([&] {
    auto now = Clock::now();
    loop.add_timer(now + milliseconds(30), [&] { fired.push_back(2); });
    auto cancelled = loop.add_timer(now + milliseconds(10), [&] { fired.push_back(99); });
    loop.add_timer(now + milliseconds(5), [&] { fired.push_back(1); });
    loop.add_timer(now + milliseconds(60), [&] { loop.stop(); });
    loop.cancel_timer(cancelled);
  });
  loop.run();
  EXPECT_EQ(fired, (std::vector<int>{1, 2}));
}

TEST(EventLoopTest, WatchReportsAReadableDescriptor) {
  EventLoop loop;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::string got;
  loop.post([&] {
    loop.watch(fds[0], EPOLLIN, [&](uint32_t) {
      char buf[16];
      ssize_t n = ::read(fds[0], buf, sizeof buf);
      got.append(buf, static_cast<size_t>(n));
      loop.unwatch(fds[0]);
      loop.stop();
    });
  });
  std::thread writer([&] { ASSERT_EQ(::write(fds[1], "hi", 2), 2); });
  loop.run();
  writer.join();
  ::close(fds[0]);
  ::close(fds[1]);
  EXPECT_EQ(got, "hi");
}

}  // namespace
}  // namespace cohort
