// Tests of LcrVictim (lcr.h, paper 004 Alg. 1).
#include "cachenode/policy/lcr.h"

#include "absl/container/flat_hash_map.h"
#include "cachenode/policy/driver.h"
#include "cachenode/policy/lru.h"
#include "cachenode/policy/test_util.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

using testing::Read;
using testing::Write;

// Load per block number.
class FakeLoad : public LoadView {
 public:
  double HomeLoad(const BlockKey& key) const override {
    auto it = load.find(key.block);
    return it == load.end() ? 0.0 : it->second;
  }
  absl::flat_hash_map<uint64_t, double> load;
};

class LcrTest : public ::testing::Test {
 protected:
  LcrTest() : slots_(8) {}
  SlotId Put(uint64_t block, bool dirty) { return slots_.Allocate(BlockKey{0, block}, dirty); }
  SlotTable slots_;
  FakeLoad load_;
};

TEST_F(LcrTest, CleanBlockInTheWindowFirst) {
  load_.load = {{0, 1.0}, {1, 0.5}, {2, 9.0}};
  const SlotId d0 = Put(0, true), d1 = Put(1, true), c2 = Put(2, false);
  LcrVictim lcr(3, &load_);
  EXPECT_EQ(lcr.Choose({d0, d1, c2}, slots_), 2u);
}

TEST_F(LcrTest, OtherwiseTheLeastLoadedDirtyBlock) {
  load_.load = {{0, 3.0}, {1, 0.5}, {2, 2.0}, {3, 0.1}};
  const SlotId d0 = Put(0, true), d1 = Put(1, true), d2 = Put(2, true), d3 = Put(3, true);
  LcrVictim lcr(3, &load_);
  // Block 3 is the least loaded but outside the window of 3.
  EXPECT_EQ(lcr.Choose({d0, d1, d2, d3}, slots_), 1u);
  LcrVictim wide(4, &load_);
  EXPECT_EQ(wide.Choose({d0, d1, d2, d3}, slots_), 3u);
}

TEST_F(LcrTest, TiesAndNoLoadViewPickTheTailMost) {
  load_.load = {{0, 1.0}, {1, 1.0}};
  const SlotId d0 = Put(0, true), d1 = Put(1, true);
  EXPECT_EQ(LcrVictim(2, &load_).Choose({d0, d1}, slots_), 0u);
  EXPECT_EQ(LcrVictim(2, nullptr).Choose({d1, d0}, slots_), 0u);
}

TEST(LcrDriverTest, DirtyVictimOnTheLeastLoadedNodeIsReportedDirty) {
  FakeLoad load;
  load.load = {{1, 5.0}, {2, 1.0}, {3, 7.0}, {4, 0.0}};
  DriverParts parts;
  parts.make_space = [](SlotTable* t) {
    return std::make_unique<GlobalSpace>(
        4, t, [](SlotTable* s, size_t) { return std::make_unique<LruOrder>(s); });
  };
  parts.victim = std::make_unique<LcrVictim>(3, &load);
  auto cache = *CacheDriver::Create(DriverConfig{"lru+lcr", 4}, std::move(parts));
  Outcome out;
  for (uint64_t b = 1; b <= 4; ++b) cache->OnAccess(Write(b), &out);
  cache->OnAccess(Read(9), &out);  // window {1, 2, 3}: all dirty; node of 2 least loaded
  ASSERT_EQ(out.evicted.size(), 1u);
  EXPECT_EQ(out.evicted[0].key.block, 2u);
  EXPECT_TRUE(out.evicted[0].dirty);
  EXPECT_EQ(cache->dirty_count(), 3u);
  // LRU from the tail is now 1, 3, 4, 9 (9 clean but outside the window of 3).
  cache->OnAccess(Read(10), &out);  // window {1, 3, 4}: all dirty; loads 5, 7, 0
  ASSERT_EQ(out.evicted.size(), 1u);
  EXPECT_EQ(out.evicted[0].key.block, 4u);
}

TEST(LcrDriverTest, WideWindowFindsCleanBlockBeyondTheFirstFew) {
  for (uint64_t clean_at : {3u, 12u, 18u}) {
    DriverParts parts;
    parts.make_space = [](SlotTable* t) {
      return std::make_unique<GlobalSpace>(
          20, t, [](SlotTable* s, size_t) { return std::make_unique<LruOrder>(s); });
    };
    parts.victim = std::make_unique<LcrVictim>(16, nullptr);
    auto cache = *CacheDriver::Create(DriverConfig{"lru+lcr", 20}, std::move(parts));
    Outcome out;
    // LRU from the tail: blocks 0..19; only `clean_at` is clean.
    for (uint64_t b = 0; b < 20; ++b) cache->OnAccess(b == clean_at ? Read(b) : Write(b), &out);
    cache->OnAccess(Read(100), &out);
    ASSERT_EQ(out.evicted.size(), 1u);
    // Inside the window of 16 the clean block goes; beyond it, the tail (no load view).
    EXPECT_EQ(out.evicted[0].key.block, clean_at < 16 ? clean_at : 0u) << clean_at;
    EXPECT_EQ(out.evicted[0].dirty, clean_at >= 16) << clean_at;
  }
}

}  // namespace
}  // namespace ringcache::policy
