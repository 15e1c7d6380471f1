// The drain watch (gateway/drain_watch.h): a live node's dirty bytes are reported with the most
// seen as the start; a node that does not answer its probe is never asked for stats (that call
// waits for a restarting node, and held the operator's `node remove` answer by its deadline).
#include "gateway/drain_watch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ringcache::gateway {
namespace {

struct Seen {
  absl::Mutex mu;
  std::vector<std::string> progress ABSL_GUARDED_BY(mu);
  std::vector<std::pair<uint64_t, uint64_t>> bytes ABSL_GUARDED_BY(mu);  // (start, left)

  DrainWatch::Report Reporter() {
    return [this](const std::string& p, uint64_t start, uint64_t left) {
      absl::MutexLock l(&mu);
      progress.push_back(p);
      bytes.emplace_back(start, left);
    };
  }
  // Waits for the n-th report (the watch samples once a second).
  bool AwaitReports(size_t n) {
    absl::MutexLock l(&mu);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return progress.size() >= n; };
    return mu.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(30));
  }
};

v1::VdiCacheStats Dirty(uint64_t bytes) {
  v1::VdiCacheStats s;
  s.set_dirty_bytes(bytes);
  return s;
}

TEST(DrainWatchTest, LiveNodeReportsItsDirtyBytesAgainstTheMostSeen) {
  Seen seen;
  std::atomic<int> sample{0};
  DrainWatch watch([](int) { return absl::OkStatus(); },
                   [&sample](std::vector<v1::VdiCacheStats>* out) {
                     if (sample++ == 0) {
                       *out = {Dirty(100), Dirty(50)};
                     } else {
                       *out = {Dirty(30)};
                     }
                     return absl::OkStatus();
                   },
                   seen.Reporter());
  ASSERT_TRUE(seen.AwaitReports(2));
  watch.Stop();
  absl::MutexLock l(&seen.mu);
  EXPECT_EQ(seen.progress[0], "destaging its dirty data");
  EXPECT_EQ(seen.bytes[0], std::make_pair(uint64_t{150}, uint64_t{150}));
  EXPECT_EQ(seen.bytes[1], std::make_pair(uint64_t{150}, uint64_t{30}));
}

TEST(DrainWatchTest, NodeThatDoesNotAnswerItsProbeIsNeverAskedForStats) {
  Seen seen;
  std::atomic<int> stats_calls{0};
  absl::Mutex release_mu;
  bool released = false;
  std::atomic<int> probe_timeout{0};
  DrainWatch watch(
      [&probe_timeout](int timeout_ms) {
        probe_timeout = timeout_ms;
        return absl::UnavailableError("connection refused");
      },
      // Like the cache client's call to a killed node: waits (here until released).
      [&](std::vector<v1::VdiCacheStats>*) {
        ++stats_calls;
        absl::MutexLock l(&release_mu);
        auto go = [&released]() { return released; };
        release_mu.AwaitWithTimeout(absl::Condition(&go), absl::Seconds(30));
        return absl::UnavailableError("deadline exceeded");
      },
      seen.Reporter());
  ASSERT_TRUE(seen.AwaitReports(2));
  EXPECT_EQ(stats_calls.load(), 0);
  EXPECT_EQ(probe_timeout.load(), DrainWatch::kProbeTimeoutMs);
  {
    absl::MutexLock l(&release_mu);
    released = true;  // (a watch that did call it ends now, not after 30 s)
  }
  watch.Stop();
  absl::MutexLock l(&seen.mu);
  EXPECT_EQ(seen.progress[0], "not answering: replaying its write-back log from the data nodes");
}

TEST(DrainWatchTest, NodeOutsideTheRingIsReportedAsReplaying) {
  Seen seen;
  DrainWatch watch(nullptr, nullptr, seen.Reporter());
  ASSERT_TRUE(seen.AwaitReports(1));
  watch.Stop();
  absl::MutexLock l(&seen.mu);
  EXPECT_EQ(seen.progress[0], "not answering: replaying its write-back log from the data nodes");
}

}  // namespace
}  // namespace ringcache::gateway
