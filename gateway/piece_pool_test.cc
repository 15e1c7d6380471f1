// PiecePool: bounded work per request — every piece runs, errors come back, and a request of
// any number of pieces uses at most the pool's threads plus the caller's.
#include "gateway/piece_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace ringcache::gateway {
namespace {

TEST(PiecePoolTest, ManyPiecesUseBoundedThreads) {
  PiecePool pool(4);
  absl::Mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> running{0}, most{0}, ran{0};
  // 1,024 pieces: a 4 GiB discard of 4 MiB objects.
  absl::Status s = pool.Run(1024, [&](size_t) {
    const int now = ++running;
    int m = most.load();
    while (now > m && !most.compare_exchange_weak(m, now)) {
    }
    {
      absl::MutexLock l(&mu);
      ids.insert(std::this_thread::get_id());
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    --running;
    ++ran;
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ran.load(), 1024);
  EXPECT_LE(ids.size(), pool.threads() + 1);
  EXPECT_LE(most.load(), static_cast<int>(pool.threads()) + 1);
}

TEST(PiecePoolTest, ReturnsFirstErrorAfterAllFinished) {
  PiecePool pool(2);
  std::atomic<int> ran{0};
  absl::Status s = pool.Run(50, [&](size_t i) {
    ++ran;
    return i == 7 || i == 30 ? absl::UnavailableError(std::to_string(i)) : absl::OkStatus();
  });
  EXPECT_EQ(ran.load(), 50);
  EXPECT_EQ(s.message(), "7");
}

TEST(PiecePoolTest, CallerProgressesWhilePoolIsBusy) {
  PiecePool pool(1);
  std::atomic<bool> release{false};
  std::thread blocker([&] {
    pool.Run(2, [&](size_t) {
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return absl::OkStatus();
    }).IgnoreError();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // The pool's only thread is stuck: this request still completes on its caller.
  std::atomic<int> ran{0};
  EXPECT_TRUE(pool.Run(10, [&](size_t) {
                    ++ran;
                    return absl::OkStatus();
                  }).ok());
  EXPECT_EQ(ran.load(), 10);
  release.store(true);
  blocker.join();
}

}  // namespace
}  // namespace ringcache::gateway
