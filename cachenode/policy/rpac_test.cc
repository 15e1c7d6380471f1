// Tests of RpacAdmission (rpac.h, paper 000): eq. 1 popularity with decay every T accesses, ineq. 2
// replacement only when Pr_B > c * Pr_A, sub-regions, unknown popularity, FIFO scan, refusal.
#include "cachenode/policy/rpac.h"

#include "cachenode/policy/driver.h"
#include "cachenode/policy/fifo.h"
#include "cachenode/policy/test_util.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

using testing::Read;
using testing::Write;

RpacConfig SmallConfig() {
  RpacConfig c;
  c.region_blocks = 4;  // blocks 0-3 are region 0, 4-7 region 1, ...
  c.depth = 2;          // halves {0,1},{2,3}; leaves {0},{1},{2},{3}
  c.cycle = 10;
  c.alpha = 0.5;
  c.c = 1.4;
  c.scan = 8;
  return c;
}

void Touch(RpacAdmission& r, uint64_t block, int times, uint32_t vdi = 0) {
  for (int i = 0; i < times; ++i) r.OnAccess(Read(block, vdi), false);
}

TEST(RpacConfigTest, Validate) {
  EXPECT_TRUE(RpacConfig{}.Validate().ok());
  RpacConfig c = SmallConfig();
  c.depth = 3;  // 8 leaves in a 4-block region
  EXPECT_FALSE(c.Validate().ok());
  c = SmallConfig();
  c.alpha = 1;
  EXPECT_FALSE(c.Validate().ok());
  c = SmallConfig();
  c.c = 0.9;
  EXPECT_FALSE(c.Validate().ok());
}

TEST(RpacAdmissionTest, PopularityCountsRegionAndSubRegions) {
  RpacAdmission r(SmallConfig());
  Touch(r, 0, 3);
  Touch(r, 1, 2);
  Touch(r, 3, 1);
  EXPECT_EQ(r.PopularityForTest(BlockKey{0, 2}, 0), 6u);  // region 0: every access
  EXPECT_EQ(r.PopularityForTest(BlockKey{0, 0}, 1), 5u);  // half {0,1}
  EXPECT_EQ(r.PopularityForTest(BlockKey{0, 2}, 1), 1u);  // half {2,3}
  EXPECT_EQ(r.PopularityForTest(BlockKey{0, 1}, 2), 2u);  // leaf {1}
  EXPECT_EQ(r.PopularityForTest(BlockKey{0, 2}, 2), 0u);  // leaf {2}
  EXPECT_EQ(r.PopularityForTest(BlockKey{0, 4}, 0), 0u);  // unknown region
  EXPECT_EQ(r.PopularityForTest(BlockKey{1, 0}, 0), 0u);  // other VDI, same block numbers
}

TEST(RpacAdmissionTest, DecaysByAlphaEveryTAccesses) {
  RpacAdmission r(SmallConfig());
  Touch(r, 0, 9);  // accesses 1..9: cycle 0
  EXPECT_EQ(r.PopularityForTest(BlockKey{0, 0}, 0), 9u);
  Touch(r, 100, 1);  // access 10: C_A mod T = 0 -> every popularity is halved
  EXPECT_EQ(r.PopularityForTest(BlockKey{0, 0}, 0), 4u);  // floor(0.5 * 9)
  EXPECT_EQ(r.PopularityForTest(BlockKey{0, 0}, 2), 4u);
  EXPECT_EQ(r.PopularityForTest(BlockKey{0, 100}, 0), 1u);
  Touch(r, 0, 1);  // access 11: Pr = Pr0 + 1
  EXPECT_EQ(r.PopularityForTest(BlockKey{0, 0}, 0), 5u);
  Touch(r, 200, 19);  // accesses 12..30: two more boundaries (20, 30)
  EXPECT_EQ(r.PopularityForTest(BlockKey{0, 0}, 0), 1u);  // 5 -> 2 -> 1
  Touch(r, 200, 10);  // boundary 40
  EXPECT_EQ(r.PopularityForTest(BlockKey{0, 0}, 0), 0u);
}

TEST(RpacAdmissionTest, ForgottenRegionsAreSweptAway) {
  RpacAdmission r(SmallConfig());
  for (uint64_t b = 0; b < 36; b += 4) Touch(r, b, 1);  // 9 regions in cycle 0, Pr = 1 each
  EXPECT_EQ(r.regions(), 9u);
  Touch(r, 1000, 40);  // several cycles: the old regions decay to 0 and the sweep removes them
  EXPECT_EQ(r.regions(), 1u);
}

class RpacReplaceTest : public ::testing::Test {
 protected:
  RpacReplaceTest() : slots_(8), rpac_(SmallConfig()) {}
  SlotId Cache(uint64_t block) { return slots_.Allocate(BlockKey{0, block}, false); }
  int Choose(uint64_t incoming, std::vector<SlotId> cands) {
    return rpac_.ChooseReplacement(BlockKey{0, incoming}, cands, slots_);
  }
  SlotTable slots_;
  RpacAdmission rpac_;
};

TEST_F(RpacReplaceTest, DecayLetsANewRegionReplaceAnOldOne) {
  const SlotId a = Cache(4);  // region 1
  Touch(rpac_, 4, 9);         // accesses 1..9: Pr_A = 9
  Touch(rpac_, 8, 1);         // access 10 (cycle boundary): region 2 starts at 1
  EXPECT_EQ(Choose(8, {a}), -1);  // 1 > 1.4 * 4 is false
  Touch(rpac_, 8, 8);         // accesses 11..18: Pr_B = 9
  EXPECT_EQ(rpac_.PopularityForTest(BlockKey{0, 4}, 0), 4u);  // floor(9 / 2)
  EXPECT_EQ(rpac_.PopularityForTest(BlockKey{0, 8}, 0), 9u);
  EXPECT_EQ(Choose(8, {a}), 0);  // 9 > 1.4 * 4 = 5.6; without the decay 9 > 12.6 would fail
}

TEST_F(RpacReplaceTest, StrictInequalityAtTheBoundary) {
  RpacConfig cfg = SmallConfig();
  cfg.cycle = 1000;  // no decay in this test
  RpacAdmission r(cfg);
  const SlotId a = Cache(4);
  Touch(r, 4, 10);  // Pr_A = 10
  Touch(r, 8, 14);  // Pr_B = 14 = 1.4 * 10: not greater
  EXPECT_EQ(r.ChooseReplacement(BlockKey{0, 8}, {a}, slots_), -1);
  Touch(r, 8, 1);  // Pr_B = 15 > 14
  EXPECT_EQ(r.ChooseReplacement(BlockKey{0, 8}, {a}, slots_), 0);
}

TEST_F(RpacReplaceTest, UnknownRegionCountsAsZeroAndScanIsInOrder) {
  RpacConfig cfg = SmallConfig();
  cfg.cycle = 1000;
  RpacAdmission r(cfg);
  const SlotId hot = Cache(4);
  const SlotId warm = Cache(12);
  const SlotId cold = Cache(20);  // region 5, never counted
  Touch(r, 4, 10);
  Touch(r, 12, 2);
  Touch(r, 8, 3);  // B: Pr_B = 3 > 1.4 * 2 but not > 1.4 * 10
  EXPECT_EQ(r.ChooseReplacement(BlockKey{0, 8}, {hot, warm, cold}, slots_), 1);
  EXPECT_EQ(r.ChooseReplacement(BlockKey{0, 8}, {hot, cold, warm}, slots_), 1);
  EXPECT_EQ(r.ChooseReplacement(BlockKey{0, 8}, {hot}, slots_), -1);
}

TEST_F(RpacReplaceTest, SameRegionComparesSubRegionsWhereTheyPart) {
  RpacConfig cfg = SmallConfig();
  cfg.cycle = 1000;
  RpacAdmission r(cfg);
  const SlotId a0 = Cache(0);
  const SlotId a1 = Cache(1);
  Touch(r, 0, 1);  // leaf {0} = 1, half {0,1} = 1
  Touch(r, 3, 2);  // leaf {3} = 2, half {2,3} = 2
  // B = 3 vs A = 0: they part at level 1: half{2,3} = 2 > 1.4 * half{0,1} = 1.4 -> replace.
  EXPECT_EQ(r.ChooseReplacement(BlockKey{0, 3}, {a0}, slots_), 0);
  // B = 1 vs A = 0: same half, part at the leaves: leaf{1} = 0 vs leaf{0} = 1 -> refuse.
  Touch(r, 1, 1);  // leaf {1} = 1: 1 > 1.4 is false
  EXPECT_EQ(r.ChooseReplacement(BlockKey{0, 1}, {a0}, slots_), -1);
  Touch(r, 1, 1);  // leaf {1} = 2 > 1.4 -> replace
  EXPECT_EQ(r.ChooseReplacement(BlockKey{0, 1}, {a0}, slots_), 0);
  // Same leaf (the block itself): never replaced.
  EXPECT_EQ(r.ChooseReplacement(BlockKey{0, 1}, {a1}, slots_), -1);
}

TEST(RpacDriverTest, ColdMissesAreNotCachedHotRegionsReplace) {
  RpacConfig cfg = SmallConfig();
  cfg.cycle = 1000;
  DriverParts parts;
  parts.make_space = [](SlotTable* t) {
    return std::make_unique<GlobalSpace>(
        2, t, [](SlotTable* s, size_t) { return std::make_unique<FifoOrder>(s); });
  };
  parts.admission = std::make_unique<RpacAdmission>(cfg);
  auto cache = *CacheDriver::Create(DriverConfig{"fifo+rpac", 2}, std::move(parts));
  Outcome out;
  // Fill: region 0 with popularity 3 (blocks 0, 1), cache = {0, 1}.
  cache->OnAccess(Read(0), &out);
  EXPECT_TRUE(out.admitted);
  cache->OnAccess(Read(1), &out);
  cache->OnAccess(Read(0), &out);
  // Cold block of region 5: Pr_B = 1 is not > 1.4 * 3 -> not cached, nothing evicted.
  cache->OnAccess(Read(20), &out);
  EXPECT_TRUE(out.rejected);
  EXPECT_TRUE(out.evicted.empty());
  // Writes are always cached (write-back): the FIFO head 0 makes room.
  cache->OnAccess(Write(21), &out);
  EXPECT_TRUE(out.admitted);
  ASSERT_EQ(out.evicted.size(), 1u);
  EXPECT_EQ(out.evicted[0].key.block, 0u);
  cache->OnAccess(Write(21), &out);  // hits: region 5 reaches 4
  cache->OnAccess(Write(21), &out);
  EXPECT_EQ(out.hit, Tier::kSsd);
  // Region 2 grows hot. FIFO scan: block 1 (region 0, Pr 3) first, then 21 (region 5, Pr 4).
  for (int i = 0; i < 4; ++i) {
    cache->OnAccess(Read(8), &out);
    EXPECT_TRUE(out.rejected) << i;  // Pr_B = 1..4: not > 4.2, not > 5.6
  }
  // Pr_B = 5 > 1.4 * 3: replaces block 1, the first candidate that qualifies.
  cache->OnAccess(Read(8), &out);
  EXPECT_TRUE(out.admitted);
  ASSERT_EQ(out.evicted.size(), 1u);
  EXPECT_EQ(out.evicted[0].key.block, 1u);
}

}  // namespace
}  // namespace ringcache::policy
