// Tests of VbqSpace (vbq.h, paper 002 eq. 1-8): configuration checks (eq. 3, eq. 8), bounds (eq. 2,
// 4, 5, 6), and exact reclaim rounds (coldest first, down to D_i * L_i, stop below alpha * S).
#include "cachenode/policy/vbq.h"

#include <vector>

#include "cachenode/policy/driver.h"
#include "cachenode/policy/lru.h"
#include "cachenode/policy/registry.h"
#include "cachenode/policy/test_util.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

using testing::Read;

TEST(VbqConfigTest, DefaultsAndEq3) {
  EXPECT_TRUE(VbqConfig{}.Validate().ok());
  VbqConfig c;
  c.u_max = 1.0;  // 1 > U_max
  EXPECT_FALSE(c.Validate().ok());
  c = VbqConfig{};
  c.u_min = 0.91;  // U_min >= D_max (0.92) fails
  EXPECT_FALSE(c.Validate().ok());
  c = VbqConfig{};
  c.d_min = 0;  // D_min > 0
  EXPECT_FALSE(c.Validate().ok());
  c = VbqConfig{};
  c.d_min = 0.93;  // D_max >= D_min
  EXPECT_FALSE(c.Validate().ok());
  c = VbqConfig{};
  c.alpha = c.xi;  // alpha < xi
  EXPECT_FALSE(c.Validate().ok());
}

TEST(VbqConfigTest, Eq8IsCheckedForEveryDistribution) {
  VbqConfig c;
  c.xi = 0.94;  // U_max = 0.95 > xi: some access distribution breaks eq. 8
  EXPECT_FALSE(c.Validate().ok());
  // ... e.g. one hot VDI and many cold ones (LHS = .93 + .02 * 90/99 = .948):
  std::vector<uint64_t> skewed(1001, 1);
  skewed[0] = 100;
  EXPECT_NEAR(c.Eq8Lhs(skewed), 0.93 + 0.02 * 90.0 / 99.0, 1e-12);
  EXPECT_FALSE(c.CheckEq8(skewed).ok());
  // ... while a mild one passes.
  EXPECT_TRUE(c.CheckEq8(std::vector<uint64_t>{10, 9, 8}).ok());
  // Equal access counts: eq. 8 reduces to U_min <= xi.
  EXPECT_TRUE(c.CheckEq8(std::vector<uint64_t>{5, 5, 5}).ok());
}

TEST(VbqConfigTest, Eq8EqualsEq7Divided) {
  const VbqConfig c;
  const std::vector<uint64_t> a = {900, 300, 120, 40, 7};
  uint64_t sum = 0;
  for (uint64_t x : a) sum += x;
  double eq7 = 0;
  for (uint64_t x : a) {
    const VbqBounds b = ComputeVbqBounds(c, x, 900, 7, sum, 1000.0);
    eq7 += b.upper * b.max_len;
  }
  EXPECT_NEAR(c.Eq8Lhs(a), eq7 / 1000.0, 1e-12);
  EXPECT_LE(c.Eq8Lhs(a), c.xi);
}

TEST(VbqBoundsTest, Eq2Eq4Eq5AndEq6Ordering) {
  const VbqConfig c;
  const std::vector<uint64_t> a = {500, 400, 250, 100, 50};  // A_1 >= ... >= A_5, eq. 1
  const uint64_t count = 1300;
  std::vector<VbqBounds> b;
  for (uint64_t x : a) b.push_back(ComputeVbqBounds(c, x, 500, 50, count, 1000.0));
  EXPECT_DOUBLE_EQ(b[0].max_len, 500.0 * 1000 / 1300);  // eq. 2
  EXPECT_DOUBLE_EQ(b[0].upper, c.u_min);                // hottest: lowest U
  EXPECT_DOUBLE_EQ(b[0].lower, c.d_max);                //          highest D
  EXPECT_DOUBLE_EQ(b[4].upper, c.u_max);                // coldest: highest U
  EXPECT_DOUBLE_EQ(b[4].lower, c.d_min);                //          lowest D
  EXPECT_NEAR(b[2].upper, c.u_min + (250.0 / 450.0) * (c.u_max - c.u_min), 1e-12);  // eq. 4
  EXPECT_NEAR(b[2].lower, c.d_max - (250.0 / 450.0) * (c.d_max - c.d_min), 1e-12);  // eq. 5
  for (size_t i = 1; i < b.size(); ++i) {
    EXPECT_GE(b[i].upper, b[i - 1].upper);
    EXPECT_LE(b[i].lower, b[i - 1].lower);
    EXPECT_GE(b[i].upper - b[i].lower, b[i - 1].upper - b[i - 1].lower);  // eq. 6
    EXPECT_GT(b[i].upper, b[i].lower);
  }
  // Equal hotness: the hottest bounds.
  const VbqBounds e = ComputeVbqBounds(c, 7, 7, 7, 21, 300.0);
  EXPECT_DOUBLE_EQ(e.upper, c.u_min);
  EXPECT_DOUBLE_EQ(e.lower, c.d_max);
  EXPECT_DOUBLE_EQ(e.max_len, 100.0);
}

std::unique_ptr<CacheDriver> VbqCache(size_t capacity, VbqConfig cfg = {}) {
  DriverParts parts;
  parts.make_space = [capacity, cfg](SlotTable* t) {
    return std::make_unique<VbqSpace>(
        capacity, cfg, t, [](SlotTable* s, size_t) { return std::make_unique<LruOrder>(s); });
  };
  return *CacheDriver::Create(DriverConfig{"vbq+lru", capacity}, std::move(parts));
}

const VbqSpace& Vbq(const CacheDriver& d) { return static_cast<const VbqSpace&>(d.space()); }

void ReadRange(CacheDriver& d, uint32_t vdi, uint64_t from, uint64_t to) {
  Outcome out;
  for (uint64_t b = from; b < to; ++b) d.OnAccess(Read(b, vdi), &out);
}

TEST(VbqSpaceTest, ReclaimsColdestFirstDownToLowerBounds) {
  // S = 100: reclaim starts before the insertion that would pass xi*S = 95.
  auto cache = VbqCache(100);
  ReadRange(*cache, 1, 0, 50);  // A_1 = 50, 50 blocks
  ReadRange(*cache, 2, 0, 30);  // A_2 = 30
  ReadRange(*cache, 3, 0, 15);  // A_3 = 15; used = 95
  EXPECT_EQ(cache->size(), 95u);
  Outcome out;
  cache->OnAccess(Read(50, 1), &out);  // A = {51, 30, 15}, count = 96
  // L = {53.125, 31.25, 15.625}; U = {.93, .941667, .95}; D = {.92, .908333, .90}.
  // Every queue is above U_i*L_i = {49.41, 29.43, 14.84}. Coldest first: VDI 3 down to
  // 14.06 (1 block), VDI 2 down to 28.39 (2), VDI 1 down to 48.88 (2); used 90 is not < alpha*S.
  EXPECT_EQ(Vbq(*cache).PlanForTest(), (std::vector<uint32_t>{3, 2, 1}));
  std::vector<BlockKey> evicted;
  for (const Eviction& e : out.evicted) evicted.push_back(e.key);
  EXPECT_EQ(evicted, (std::vector<BlockKey>{{3, 0}, {2, 0}, {2, 1}, {1, 0}, {1, 1}}));
  EXPECT_TRUE(out.admitted);
  EXPECT_EQ(cache->size(), 91u);
}

TEST(VbqSpaceTest, QueuesWithinTheirUpperBoundAreSparedAndAlphaStopsTheRound) {
  auto cache = VbqCache(100);
  ReadRange(*cache, 1, 0, 50);                              // A_1 = 50, 50 blocks
  for (int r = 0; r < 3; ++r) ReadRange(*cache, 2, 0, 10);  // A_2 = 30, 10 blocks (hits)
  ReadRange(*cache, 3, 0, 35);                              // A_3 = 35, 35 blocks; used = 95
  Outcome out;
  cache->OnAccess(Read(50, 1), &out);  // A = {51, 30, 35}, count = 116
  // L = {43.97, 25.86, 30.17}; U*L = {40.89, 24.57, 28.52}: VDI 2 (10 blocks) is within its
  // bound. Plan: VDI 3 (colder) then VDI 1. VDI 3 gives blocks until used < alpha*S = 90.
  EXPECT_EQ(Vbq(*cache).PlanForTest(), (std::vector<uint32_t>{3, 1}));
  ASSERT_EQ(out.evicted.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(out.evicted[i].key, (BlockKey{3, i}));
  EXPECT_EQ(cache->size(), 90u);
}

TEST(VbqSpaceTest, ShedTakesFromTheQueueFurthestAboveItsShare) {
  // CacheDriver::Shed (slot pressure of an exclusive RAM tier): the LRU block of the queue whose
  // length is the largest multiple of its L_m, though the cache is not full; not the fallback's
  // queue with the fewest accesses.
  auto cache = VbqCache(100);
  ReadRange(*cache, 1, 0, 50);
  ReadRange(*cache, 1, 0, 10);                              // A_1 = 60, 50 blocks
  for (int r = 0; r < 10; ++r) ReadRange(*cache, 2, 0, 3);  // A_2 = 30, 3 blocks
  // L = {66.7, 33.3}: VDI 1 holds 0.75 of its share, VDI 2 0.09.
  Outcome out;
  ASSERT_TRUE(cache->Shed(&out));
  ASSERT_EQ(out.evicted.size(), 1u);
  EXPECT_EQ(out.evicted[0].key, (BlockKey{1, 10}));  // 0..9 were read again
  EXPECT_EQ(cache->size(), 52u);
  auto empty = VbqCache(100);
  EXPECT_FALSE(empty->Shed(&out));
}

TEST(VbqSpaceTest, StatsReportAccessesLengthsAndBounds) {
  auto cache = VbqCache(100);
  ReadRange(*cache, 7, 0, 20);
  ReadRange(*cache, 8, 0, 5);
  std::vector<VdiStats> stats;
  cache->AppendVdiStats(&stats);
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].vdi, 7u);
  EXPECT_EQ(stats[0].accesses, 20u);
  EXPECT_EQ(stats[0].blocks, 20u);
  EXPECT_DOUBLE_EQ(stats[0].max_blocks, 80.0);
  EXPECT_DOUBLE_EQ(stats[0].upper, 0.93);
  EXPECT_DOUBLE_EQ(stats[1].max_blocks, 20.0);
  EXPECT_DOUBLE_EQ(stats[1].upper, 0.95);
  EXPECT_DOUBLE_EQ(stats[1].lower, 0.90);
  EXPECT_LE(Vbq(*cache).UpperSumFraction(), VbqConfig{}.xi);
}

TEST(VbqSpaceTest, HotterVdiKeepsMoreSpaceUnderPressure) {
  auto cache = VbqCache(200);
  Outcome out;
  // VDI 1 re-reads a 150-block working set; VDI 2 scans 10x more rarely but never repeats.
  uint64_t scan = 0;
  for (int i = 0; i < 20000; ++i) {
    cache->OnAccess(Read(i % 150, 1), &out);
    if (i % 3 == 0) cache->OnAccess(Read(scan++, 2), &out);
  }
  std::vector<VdiStats> stats;
  cache->AppendVdiStats(&stats);
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_GT(stats[0].blocks, stats[1].blocks);
  EXPECT_LE(cache->size(), 190u);  // never above xi * S
  // Between rounds a queue may pass its upper bound by at most the (xi - alpha) * S insertions.
  for (const VdiStats& s : stats) EXPECT_LE(double(s.blocks), s.upper * s.max_blocks + 20);
}

TEST(VbqSpaceTest, DecayHalvesAccessCounts) {
  VbqConfig cfg;
  cfg.decay_interval = 10;
  auto cache = VbqCache(100, cfg);
  ReadRange(*cache, 1, 0, 9);
  ReadRange(*cache, 2, 0, 1);  // 10th access: A = {9, 1} -> {4, 0}
  std::vector<VdiStats> stats;
  cache->AppendVdiStats(&stats);
  EXPECT_EQ(stats[0].accesses, 4u);
  EXPECT_EQ(stats[1].accesses, 0u);
}

VbqConfig Utility() {
  VbqConfig cfg;
  cfg.share = VbqShare::kUtility;
  return cfg;
}

double Target(const CacheDriver& d, uint32_t vdi) {
  std::vector<VdiStats> stats;
  d.AppendVdiStats(&stats);
  for (const VdiStats& s : stats) {
    if (s.vdi == vdi) return s.max_blocks;
  }
  return -1;
}

TEST(VbqUtilityTest, NewQueuesSplitTheCacheAndTargetsSumToS) {
  auto cache = VbqCache(120, Utility());
  ReadRange(*cache, 1, 0, 1);
  EXPECT_DOUBLE_EQ(Target(*cache, 1), 120.0);
  ReadRange(*cache, 2, 0, 1);  // the second queue takes 1/2, from the first
  EXPECT_DOUBLE_EQ(Target(*cache, 1), 60.0);
  EXPECT_DOUBLE_EQ(Target(*cache, 2), 60.0);
  ReadRange(*cache, 3, 0, 1);  // the third 1/3, the others keep 2/3 of theirs
  EXPECT_DOUBLE_EQ(Target(*cache, 1), 40.0);
  EXPECT_DOUBLE_EQ(Target(*cache, 3), 40.0);
  // Eq. 7/8: sum U_i * L_i <= xi * S holds with the targets as L_i.
  EXPECT_LE(Vbq(*cache).UpperSumFraction(), VbqConfig{}.xi);
}

TEST(VbqUtilityTest, GhostHitMovesTargetFromTheLeastUsefulQueue) {
  VbqConfig cfg = Utility();
  cfg.step = 5;
  auto cache = VbqCache(100, cfg);
  ReadRange(*cache, 1, 0, 60);   // VDI 1: 60 blocks
  ReadRange(*cache, 2, 0, 35);   // VDI 2: 35 blocks; used 95 = xi*S
  ReadRange(*cache, 2, 35, 36);  // a round: both queues above U*L (= .93/.95 * 50)
  std::vector<VdiStats> before;
  cache->AppendVdiStats(&before);
  ASSERT_EQ(before.size(), 2u);
  // VDI 1 lost its oldest blocks to the round: re-reading block 0 is a ghost hit, which moves
  // `step` blocks of target from VDI 2 (no ghost hits) to VDI 1, and admits the block.
  Outcome out;
  cache->OnAccess(Read(0, 1), &out);
  EXPECT_FALSE(out.hit != Tier::kNone);
  EXPECT_TRUE(out.admitted);
  EXPECT_DOUBLE_EQ(Target(*cache, 1), before[0].max_blocks + 5);
  EXPECT_DOUBLE_EQ(Target(*cache, 2), before[1].max_blocks - 5);
  // A miss that was never cached moves nothing.
  cache->OnAccess(Read(1000, 2), &out);
  EXPECT_DOUBLE_EQ(Target(*cache, 1), before[0].max_blocks + 5);
}

TEST(VbqUtilityTest, ReusedVdiTakesTheSpaceOfAScanningOne) {
  // Equal access rates: eq. 2 would give each half. VDI 1 loops over 120 blocks (more than half
  // of the cache), VDI 2 scans and never repeats: with utility sizing VDI 1 takes the space and
  // hits; with eq. 2 it thrashes.
  const auto run = [](const VbqConfig& cfg, uint64_t* hits1) {
    auto cache = VbqCache(200, cfg);
    Outcome out;
    uint64_t scan = 0;
    *hits1 = 0;
    for (int i = 0; i < 40000; ++i) {
      cache->OnAccess(Read(i % 120, 1), &out);
      if (i >= 20000 && out.hit != Tier::kNone) ++*hits1;
      cache->OnAccess(Read(scan++, 2), &out);
    }
    std::vector<VdiStats> stats;
    cache->AppendVdiStats(&stats);
    return stats;
  };
  uint64_t hits_utility = 0, hits_accesses = 0;
  const std::vector<VdiStats> u = run(Utility(), &hits_utility);
  run(VbqConfig{}, &hits_accesses);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_GT(u[0].max_blocks, 120.0);
  EXPECT_GE(u[0].blocks, 115u);
  EXPECT_GT(hits_utility, 19000u);
  EXPECT_LT(hits_accesses, 1000u);
  // The scanning queue keeps its floor of S / (64 n) and the bounds keep eq. 6's order.
  EXPECT_GE(u[1].max_blocks, 200.0 / 128 - 1e-9);
  EXPECT_GE(u[1].upper - u[1].lower, u[0].upper - u[0].lower - 1e-12);
}

TEST(VbqUtilityTest, RegistryParsesShare) {
  PolicyContext ctx;
  ctx.capacity_blocks = 100;
  EXPECT_TRUE(MakePolicy("vbq(share=utility,step=2,ghost=0.5)+s3fifo+sieve", ctx).ok());
  EXPECT_TRUE(MakePolicy(kDefaultPolicy, ctx).ok());
  auto bad = MakePolicy("vbq(share=popular)+lru", ctx);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("accesses or utility"), std::string::npos);
  EXPECT_FALSE(MakePolicy("vbq(share=utility,step=0)+lru", ctx).ok());
}

}  // namespace
}  // namespace ringcache::policy
