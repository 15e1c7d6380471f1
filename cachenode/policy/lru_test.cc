// Tests of LruOrder (lru.h): the order itself, and exact hit counts through the driver checked by
// hand and against an independent naive LRU.
#include "cachenode/policy/lru.h"

#include <list>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "cachenode/policy/driver.h"
#include "cachenode/policy/test_util.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

using testing::Read;
using testing::Reads;
using testing::Replay;
using testing::Write;

std::unique_ptr<CacheDriver> LruCache(size_t capacity) {
  DriverParts parts;
  parts.make_space = [capacity](SlotTable* t) {
    return std::make_unique<GlobalSpace>(
        capacity, t, [](SlotTable* s, size_t) { return std::make_unique<LruOrder>(s); });
  };
  DriverConfig c{"lru", capacity};
  return *CacheDriver::Create(c, std::move(parts));
}

TEST(LruOrderTest, CandidatesFromTheTailAndHitsMoveToHead) {
  SlotTable t(4);
  LruOrder o(&t);
  for (uint64_t b = 0; b < 4; ++b) o.Insert(t.Allocate(BlockKey{0, b}, false));
  o.Touch(0);
  SlotId c[4];
  ASSERT_EQ(o.Candidates(absl::MakeSpan(c, 4)), 4u);
  EXPECT_EQ(std::vector<SlotId>(c, c + 4), (std::vector<SlotId>{1, 2, 3, 0}));
  ASSERT_EQ(o.Candidates(absl::MakeSpan(c, 2)), 2u);
  EXPECT_EQ(c[1], 2u);
  o.Remove(1, true);
  EXPECT_EQ(o.size(), 3u);
  ASSERT_EQ(o.Candidates(absl::MakeSpan(c, 1)), 1u);
  EXPECT_EQ(c[0], 2u);
}

TEST(LruOrderTest, HandCheckedTrace) {
  // Capacity 3: 1m 2m 3m 1h 4m(-2) 2m(-3) 5m(-1) 1m(-4) -> 1 hit.
  auto cache = LruCache(3);
  const testing::Tally t = Replay(*cache, Reads({1, 2, 3, 1, 4, 2, 5, 1}));
  EXPECT_EQ(t.hits, 1u);
  EXPECT_EQ(t.evicted, 4u);
  EXPECT_EQ(cache->Lookup(BlockKey{0, 1}), Tier::kSsd);
  EXPECT_EQ(cache->Lookup(BlockKey{0, 4}), Tier::kNone);
}

// Independent LRU: std::list with the most recent at the front.
struct NaiveLru {
  explicit NaiveLru(size_t c) : cap(c) {}
  size_t cap;
  std::list<uint64_t> order;
  absl::flat_hash_map<uint64_t, std::pair<std::list<uint64_t>::iterator, bool>> where;
  uint64_t hits = 0, dirty_evictions = 0;
  void Access(uint64_t b, bool write) {
    auto it = where.find(b);
    if (it != where.end()) {
      ++hits;
      order.erase(it->second.first);
      order.push_front(b);
      it->second.first = order.begin();
      it->second.second |= write;
      return;
    }
    if (order.size() == cap) {
      const uint64_t v = order.back();
      dirty_evictions += where[v].second;
      where.erase(v);
      order.pop_back();
    }
    order.push_front(b);
    where[b] = {order.begin(), write};
  }
};

TEST(LruOrderTest, MatchesNaiveLruOnRandomTraces) {
  std::mt19937_64 rng(7);
  for (size_t cap : {1, 2, 5, 17, 64}) {
    std::vector<Access> trace;
    NaiveLru naive{cap};
    for (int i = 0; i < 5000; ++i) {
      // Skewed: half the accesses go to 10 hot blocks.
      const uint64_t b = (rng() % 2) ? rng() % 10 : rng() % 200;
      const bool w = rng() % 4 == 0;
      trace.push_back(w ? Write(b) : Read(b));
      naive.Access(b, w);
    }
    auto cache = LruCache(cap);
    const testing::Tally t = Replay(*cache, trace);
    EXPECT_EQ(t.hits, naive.hits) << "capacity " << cap;
    EXPECT_EQ(t.dirty_evicted, naive.dirty_evictions) << "capacity " << cap;
    EXPECT_EQ(cache->size(), naive.order.size());
  }
}

}  // namespace
}  // namespace ringcache::policy
