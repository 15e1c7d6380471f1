// Tests of FifoOrder (fifo.h).
#include "cachenode/policy/fifo.h"

#include <deque>
#include <random>

#include "absl/container/flat_hash_set.h"
#include "cachenode/policy/driver.h"
#include "cachenode/policy/test_util.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

std::unique_ptr<CacheDriver> FifoCache(size_t capacity) {
  DriverParts parts;
  parts.make_space = [capacity](SlotTable* t) {
    return std::make_unique<GlobalSpace>(
        capacity, t, [](SlotTable* s, size_t) { return std::make_unique<FifoOrder>(s); });
  };
  return *CacheDriver::Create(DriverConfig{"fifo", capacity}, std::move(parts));
}

TEST(FifoOrderTest, HitsDoNotReorder) {
  SlotTable t(3);
  FifoOrder o(&t);
  for (uint64_t b = 0; b < 3; ++b) o.Insert(t.Allocate(BlockKey{0, b}, false));
  o.Touch(0);
  SlotId c[3];
  ASSERT_EQ(o.Candidates(absl::MakeSpan(c, 3)), 3u);
  EXPECT_EQ(c[0], 0u);
  EXPECT_EQ(c[2], 2u);
}

TEST(FifoOrderTest, HandCheckedTrace) {
  // Capacity 3: 1m 2m 3m 1h 4m(-1) 2h 5m(-2) 1m(-3) -> 2 hits.
  auto cache = FifoCache(3);
  const testing::Tally t = testing::Replay(*cache, testing::Reads({1, 2, 3, 1, 4, 2, 5, 1}));
  EXPECT_EQ(t.hits, 2u);
  EXPECT_EQ(t.evicted, 3u);
}

TEST(FifoOrderTest, MatchesNaiveFifo) {
  std::mt19937_64 rng(11);
  for (size_t cap : {1, 3, 20}) {
    std::deque<uint64_t> q;
    absl::flat_hash_set<uint64_t> in;
    uint64_t hits = 0;
    std::vector<Access> trace;
    for (int i = 0; i < 4000; ++i) {
      const uint64_t b = rng() % 60;
      trace.push_back(testing::Read(b));
      if (in.contains(b)) {
        ++hits;
        continue;
      }
      if (q.size() == cap) {
        in.erase(q.front());
        q.pop_front();
      }
      q.push_back(b);
      in.insert(b);
    }
    auto cache = FifoCache(cap);
    EXPECT_EQ(testing::Replay(*cache, trace).hits, hits) << "capacity " << cap;
  }
}

}  // namespace
}  // namespace ringcache::policy
