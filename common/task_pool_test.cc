// TaskPool: lanes bound what one kind of work runs at once, the pool grows for the others, and
// shutdown runs everything queued, lanes included.
#include "common/task_pool.h"

#include <atomic>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace ringcache {
namespace {

TEST(TaskPoolTest, StuckLaneHoldsItsLimitAndOtherLanesStillRun) {
  TaskPool::Options o;
  o.threads = 1;
  o.max_threads = 8;
  o.lane_limit = 2;
  TaskPool pool(o);
  absl::Notification release;
  std::atomic<int> stuck_running{0}, stuck_done{0};
  absl::BlockingCounter two_in(2);
  for (int i = 0; i < 5; ++i) {
    pool.Submit("stuck", [&] {
      if (stuck_running.fetch_add(1) < 2) two_in.DecrementCount();
      release.WaitForNotification();
      stuck_done.fetch_add(1);
    });
  }
  two_in.Wait();
  EXPECT_EQ(pool.lane_waiting(), 3);
  // Another lane (and a task of no lane) run while "stuck" holds its two threads.
  absl::Notification other, plain;
  pool.Submit("other", [&] { other.Notify(); });
  pool.Submit([&] { plain.Notify(); });
  other.WaitForNotification();
  plain.WaitForNotification();
  EXPECT_EQ(stuck_running.load(), 2) << "the lane never ran more than its limit";
  EXPECT_LE(pool.threads(), 8);
  release.Notify();
  pool.Shutdown();
  EXPECT_EQ(stuck_done.load(), 5) << "shutdown ran the lane's waiting tasks";
  EXPECT_EQ(pool.lane_waiting(), 0);
}

TEST(TaskPoolTest, FixedPoolRunsEverythingInOrderOfSubmission) {
  TaskPool pool(1);
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) pool.Submit([&order, i] { order.push_back(i); });
  pool.Shutdown();
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(pool.threads(), 0);
}

TEST(TaskPoolTest, ThreadsBeyondTheKeptOnesEndWhenIdle) {
  TaskPool::Options o;
  o.threads = 1;
  o.max_threads = 4;
  o.idle_exit = absl::Milliseconds(20);
  TaskPool pool(o);
  absl::Notification release;
  absl::BlockingCounter started(4);
  for (int i = 0; i < 4; ++i) {
    pool.Submit([&] {
      started.DecrementCount();
      release.WaitForNotification();
    });
  }
  started.Wait();  // four at once: the pool grew to its maximum
  EXPECT_EQ(pool.threads(), 4);
  release.Notify();
  // The three extra threads end after their idle time; the kept one stays.
  for (int i = 0; i < 10000 && pool.threads() > 1; ++i) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(pool.threads(), 1);
  absl::Notification again;
  pool.Submit([&] { again.Notify(); });
  again.WaitForNotification();
}

}  // namespace
}  // namespace ringcache
