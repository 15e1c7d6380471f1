// Tests of CflruOrder (cflru.h): clean-first eviction inside the window, the LRU tail otherwise.
#include "cachenode/policy/cflru.h"

#include "cachenode/policy/driver.h"
#include "cachenode/policy/test_util.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

using testing::Read;
using testing::Write;

std::unique_ptr<CacheDriver> CflruCache(size_t capacity, size_t window) {
  DriverParts parts;
  parts.make_space = [capacity, window](SlotTable* t) {
    return std::make_unique<GlobalSpace>(capacity, t, [window](SlotTable* s, size_t) {
      return std::make_unique<CflruOrder>(s, window);
    });
  };
  return *CacheDriver::Create(DriverConfig{"cflru", capacity}, std::move(parts));
}

TEST(CflruOrderTest, CandidateOrderIsCleanOfWindowThenLru) {
  SlotTable t(5);
  CflruOrder o(&t, 3);
  // LRU order from the tail: 0(d) 1(c) 2(d) 3(c) 4(c).
  const bool dirty[] = {true, false, true, false, false};
  for (uint64_t b = 0; b < 5; ++b) o.Insert(t.Allocate(BlockKey{0, b}, dirty[b]));
  SlotId c[5];
  ASSERT_EQ(o.Candidates(absl::MakeSpan(c, 5)), 5u);
  // Window = {0, 1, 2}: clean 1 first, then the rest in LRU order.
  EXPECT_EQ(std::vector<SlotId>(c, c + 5), (std::vector<SlotId>{1, 0, 2, 3, 4}));
}

TEST(CflruOrderTest, EvictsCleanInWindowElseDirtyTail) {
  Outcome out;
  {
    auto cache = CflruCache(4, 2);
    cache->OnAccess(Write(1), &out);
    cache->OnAccess(Write(2), &out);
    cache->OnAccess(Read(3), &out);
    cache->OnAccess(Read(4), &out);
    cache->OnAccess(Read(5), &out);  // window {1, 2} all dirty: LRU tail 1 goes, dirty
    ASSERT_EQ(out.evicted.size(), 1u);
    EXPECT_EQ(out.evicted[0].key.block, 1u);
    EXPECT_TRUE(out.evicted[0].dirty);
  }
  {
    auto cache = CflruCache(4, 3);
    cache->OnAccess(Write(1), &out);
    cache->OnAccess(Write(2), &out);
    cache->OnAccess(Read(3), &out);
    cache->OnAccess(Read(4), &out);
    cache->OnAccess(Read(5), &out);  // window {1, 2, 3}: clean 3 goes
    ASSERT_EQ(out.evicted.size(), 1u);
    EXPECT_EQ(out.evicted[0].key.block, 3u);
    EXPECT_FALSE(out.evicted[0].dirty);
    EXPECT_EQ(cache->dirty_count(), 2u);
  }
}

TEST(CflruOrderTest, MarkCleanMakesABlockPreferred) {
  auto cache = CflruCache(3, 3);
  Outcome out;
  for (uint64_t b = 1; b <= 3; ++b) cache->OnAccess(Write(b), &out);
  ASSERT_TRUE(cache->MarkClean(BlockKey{0, 2}));
  cache->OnAccess(Read(9), &out);
  ASSERT_EQ(out.evicted.size(), 1u);
  EXPECT_EQ(out.evicted[0].key.block, 2u);
  EXPECT_FALSE(out.evicted[0].dirty);
}

}  // namespace
}  // namespace ringcache::policy
