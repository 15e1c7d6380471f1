// Tests of CacheDriver (driver.h): the shared access path and dirty state, and the parts together
// (VBQ + LRU + sieve + LCR with a load view; bypass; replacement veto).
#include "cachenode/policy/driver.h"

#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "cachenode/policy/lcr.h"
#include "cachenode/policy/lru.h"
#include "cachenode/policy/sieve.h"
#include "cachenode/policy/test_util.h"
#include "cachenode/policy/vbq.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

using testing::Read;
using testing::Write;

OrderFactory Lru() {
  return [](SlotTable* s, size_t) { return std::make_unique<LruOrder>(s); };
}

DriverParts GlobalLru(size_t capacity) {
  DriverParts parts;
  parts.make_space = [capacity](SlotTable* t) {
    return std::make_unique<GlobalSpace>(capacity, t, Lru());
  };
  return parts;
}

TEST(DriverConfigTest, RejectsZeroCapacityAndMissingSpace) {
  EXPECT_FALSE(CacheDriver::Create(DriverConfig{"x", 0}, GlobalLru(1)).ok());
  EXPECT_FALSE(CacheDriver::Create(DriverConfig{"x", 4}, DriverParts{}).ok());
}

TEST(DriverTest, WritesAreDirtyAndDirtyEvictionsAreReported) {
  auto cache = *CacheDriver::Create(DriverConfig{"lru", 2}, GlobalLru(2));
  EXPECT_EQ(cache->name(), "lru");
  Outcome out;
  cache->OnAccess(Write(1), &out);
  EXPECT_TRUE(out.admitted);
  EXPECT_EQ(out.ssd_writes, 1u);
  EXPECT_EQ(cache->dirty_count(), 1u);
  cache->OnAccess(Read(2), &out);
  EXPECT_EQ(cache->dirty_count(), 1u);
  cache->OnAccess(Read(3), &out);  // evicts 1 (LRU), dirty: a write home
  ASSERT_EQ(out.evicted.size(), 1u);
  EXPECT_EQ(out.evicted[0].key, (BlockKey{0, 1}));
  EXPECT_TRUE(out.evicted[0].dirty);
  EXPECT_EQ(out.evicted[0].from, Tier::kSsd);
  EXPECT_EQ(cache->dirty_count(), 0u);
  cache->OnAccess(Write(2), &out);  // write hit: dirty, one SSD write, no eviction
  EXPECT_EQ(out.hit, Tier::kSsd);
  EXPECT_EQ(out.ssd_writes, 1u);
  EXPECT_TRUE(out.evicted.empty());
  EXPECT_EQ(cache->dirty_count(), 1u);
  cache->OnAccess(Read(4), &out);  // evicts 3, clean
  ASSERT_EQ(out.evicted.size(), 1u);
  EXPECT_EQ(out.evicted[0].key.block, 3u);
  EXPECT_FALSE(out.evicted[0].dirty);
  cache->OnAccess(Read(2), &out);  // read hit: no SSD write
  EXPECT_EQ(out.ssd_writes, 0u);
}

TEST(DriverTest, MarkCleanEraseLookup) {
  auto cache = *CacheDriver::Create(DriverConfig{"lru", 4}, GlobalLru(4));
  Outcome out;
  cache->OnAccess(Write(1, 5), &out);
  cache->OnAccess(Write(2, 5), &out);
  EXPECT_EQ(cache->Lookup(BlockKey{5, 1}), Tier::kSsd);
  EXPECT_EQ(cache->Lookup(BlockKey{4, 1}), Tier::kNone);
  EXPECT_TRUE(cache->MarkClean(BlockKey{5, 1}));
  EXPECT_TRUE(cache->MarkClean(BlockKey{5, 1}));  // idempotent
  EXPECT_FALSE(cache->MarkClean(BlockKey{5, 9}));
  EXPECT_EQ(cache->dirty_count(), 1u);
  EXPECT_TRUE(cache->Erase(BlockKey{5, 2}));  // dropped without a destage
  EXPECT_FALSE(cache->Erase(BlockKey{5, 2}));
  EXPECT_EQ(cache->dirty_count(), 0u);
  EXPECT_EQ(cache->size(), 1u);
  EXPECT_EQ(cache->Lookup(BlockKey{5, 2}), Tier::kNone);
  // The erased slot is reusable and the order stays consistent.
  for (uint64_t b = 10; b < 20; ++b) cache->OnAccess(Read(b, 5), &out);
  EXPECT_EQ(cache->size(), 4u);
}

// A bypass that fires for VDI 9 only.
class BypassVdi9 : public Bypass {
 public:
  std::string_view name() const override { return "vdi9"; }
  bool Check(const Access& a, bool hit) override {
    seen += 1;
    hits += hit;
    return a.key.vdi == 9;
  }
  size_t MetadataBytes() const override { return 0; }
  int seen = 0, hits = 0;
};

TEST(DriverTest, BypassAppliesToMissesHitsAreServed) {
  DriverParts parts = GlobalLru(4);
  auto bypass = std::make_unique<BypassVdi9>();
  BypassVdi9* b = bypass.get();
  parts.bypasses.push_back(std::move(bypass));
  auto cache = *CacheDriver::Create(DriverConfig{"lru+x", 4}, std::move(parts));
  Outcome out;
  cache->OnAccess(Write(1, 9), &out);
  EXPECT_TRUE(out.bypassed);
  EXPECT_FALSE(out.admitted);
  EXPECT_EQ(out.ssd_writes, 0u);
  EXPECT_EQ(cache->size(), 0u);
  EXPECT_EQ(cache->dirty_count(), 0u);
  cache->OnAccess(Read(1, 8), &out);
  EXPECT_TRUE(out.admitted);
  cache->OnAccess(Read(1, 8), &out);
  EXPECT_EQ(out.hit, Tier::kSsd);
  EXPECT_EQ(b->seen, 3);
  EXPECT_EQ(b->hits, 1);
}

class FakeLoad : public LoadView {
 public:
  double HomeLoad(const BlockKey& key) const override { return key.vdi == 1 ? 10.0 : 1.0; }
};

TEST(DriverTest, VbqSieveLcrTogether) {
  FakeLoad load;
  DriverParts parts;
  parts.make_space = [](SlotTable* t) {
    return std::make_unique<VbqSpace>(20, VbqConfig{}, t, Lru());
  };
  parts.admission = std::make_unique<SieveAdmission>(testing::Sieve(2, 64));
  parts.victim = std::make_unique<LcrVictim>(4, &load);
  auto cache = *CacheDriver::Create(DriverConfig{"vbq+lru+sieve+lcr", 20}, std::move(parts));
  Outcome out;
  std::mt19937_64 rng(1);
  uint64_t dirty_evictions = 0, evictions = 0, admitted = 0;
  for (int i = 0; i < 5000; ++i) {
    const uint32_t vdi = rng() % 3;
    const uint64_t b = rng() % 30;
    const Access a = (rng() % 3 == 0) ? Write(b, vdi) : Read(b, vdi);
    cache->OnAccess(a, &out);
    admitted += out.admitted;
    for (const Eviction& e : out.evicted) {
      ++evictions;
      dirty_evictions += e.dirty;
      EXPECT_FALSE(e.key == a.key);  // invariant 3
      EXPECT_EQ(cache->Lookup(e.key), Tier::kNone);
    }
    ASSERT_LE(cache->size(), 19u);  // never above xi * S = 19
  }
  EXPECT_GT(admitted, 0u);
  EXPECT_GT(evictions, 0u);
  EXPECT_GT(dirty_evictions, 0u);
  // Sum of the per-VDI queues equals the cache size; dirty count is consistent.
  std::vector<VdiStats> stats;
  cache->AppendVdiStats(&stats);
  size_t total = 0;
  for (const VdiStats& s : stats) total += s.blocks;
  EXPECT_EQ(total, cache->size());
  for (uint32_t v = 0; v < 3; ++v) {
    for (uint64_t b = 0; b < 30; ++b) {
      if (cache->Lookup(BlockKey{v, b}) != Tier::kNone && !cache->MarkClean(BlockKey{v, b})) {
        ADD_FAILURE();
      }
    }
  }
  EXPECT_EQ(cache->dirty_count(), 0u);
  EXPECT_GT(cache->MetadataBytes(), 0u);
}

TEST(DriverTest, MetadataBytesPerBlockOfLruIsSmall) {
  const size_t cap = 1 << 18;
  auto cache = *CacheDriver::Create(DriverConfig{"lru", cap}, GlobalLru(cap));
  Outcome out;
  for (uint64_t b = 0; b < cap; ++b) cache->OnAccess(Read(b), &out);
  EXPECT_LE(cache->MetadataBytes() / cap, 48u);
}

}  // namespace
}  // namespace ringcache::policy
