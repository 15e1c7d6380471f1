// Tests of NodeTiers (node_tiers.h): the cache node's RAM/SSD rules as the simulator runs them.
#include "cachenode/policy/node_tiers.h"

#include "cachenode/policy/registry.h"
#include "cachenode/policy/test_util.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

using testing::Read;
using testing::Write;

std::unique_ptr<CachePolicy> Tiers(const std::string& spec, size_t capacity, size_t ram,
                                   const std::string& placement = "lru") {
  PolicyContext ctx;
  ctx.capacity_blocks = capacity;
  ctx.ram_blocks = ram;
  auto p = MakeNodePolicy(spec, placement, ctx);
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

TEST(NodeTiersTest, FillsGoToRamAndCostAnSsdWriteOnlyWhenDemoted) {
  auto t = Tiers("lru", 8, 2);
  Outcome out;
  t->OnAccess(Read(1), &out);  // miss, admitted into RAM: no SSD write
  EXPECT_TRUE(out.admitted);
  EXPECT_EQ(out.ssd_writes, 0u);
  t->OnAccess(Read(2), &out);
  EXPECT_EQ(out.ssd_writes, 0u);
  t->OnAccess(Read(3), &out);  // RAM holds 2: block 1 is demoted to a fresh slot
  EXPECT_EQ(out.ssd_writes, 1u);
  EXPECT_EQ(t->Lookup(BlockKey{0, 1}), Tier::kSsd);
  EXPECT_EQ(t->Lookup(BlockKey{0, 3}), Tier::kRam);
  // An SSD hit is promoted; it keeps its slot, so demoting it again costs nothing.
  t->OnAccess(Read(1), &out);
  EXPECT_EQ(out.hit, Tier::kSsd);
  EXPECT_EQ(out.promotions, 1u);
  EXPECT_EQ(out.ssd_writes, 1u);  // block 2 went down to a fresh slot
  t->OnAccess(Read(3), &out);
  EXPECT_EQ(out.hit, Tier::kRam);
  t->OnAccess(Read(4), &out);  // demotes block 1 (shadow slot: free), 4 into RAM
  EXPECT_EQ(out.ssd_writes, 0u);
  EXPECT_EQ(t->Lookup(BlockKey{0, 1}), Tier::kSsd);
}

TEST(NodeTiersTest, WritesTakeASlotAndEvictionsLeaveBothTiers) {
  auto t = Tiers("lru", 3, 1);
  Outcome out;
  t->OnAccess(Write(1), &out);
  EXPECT_EQ(out.ssd_writes, 1u);  // a cached write always takes a slot
  EXPECT_EQ(t->Lookup(BlockKey{0, 1}), Tier::kRam);
  t->OnAccess(Write(2), &out);  // block 1 leaves RAM: it has a slot, nothing to write
  EXPECT_EQ(out.ssd_writes, 1u);
  EXPECT_EQ(t->dirty_count(), 2u);
  t->OnAccess(Read(3), &out);
  t->OnAccess(Read(4), &out);  // the membership (3 blocks) evicts block 1, dirty
  ASSERT_EQ(out.evicted.size(), 1u);
  EXPECT_EQ(out.evicted[0].key, (BlockKey{0, 1}));
  EXPECT_TRUE(out.evicted[0].dirty);
  EXPECT_EQ(t->Lookup(BlockKey{0, 1}), Tier::kNone);
  EXPECT_EQ(t->size(), 3u);
}

TEST(NodeTiersTest, SieveDropsCleanRamOnlyBlocksInsteadOfWritingThem) {
  auto t = Tiers("lru", 8, 1, "lru(sieve=1)");
  Outcome out;
  t->OnAccess(Read(1), &out);  // into RAM, read once
  t->OnAccess(Read(2), &out);  // RAM holds 1: block 1 leaves RAM and fails the sieve: dropped
  EXPECT_EQ(out.ssd_writes, 0u);
  ASSERT_EQ(out.evicted.size(), 1u);
  EXPECT_EQ(out.evicted[0].key, (BlockKey{0, 1}));
  EXPECT_FALSE(out.evicted[0].dirty);
  EXPECT_EQ(t->Lookup(BlockKey{0, 1}), Tier::kNone);
  EXPECT_EQ(t->size(), 1u);
  t->OnAccess(Read(2), &out);  // block 2 read twice: it passes and is written to a slot
  t->OnAccess(Read(3), &out);
  EXPECT_EQ(out.ssd_writes, 1u);
  EXPECT_EQ(t->Lookup(BlockKey{0, 2}), Tier::kSsd);
}

TEST(NodeTiersTest, HitsAreTheMembershipsAndCompletePoliciesAreRefused) {
  // The tiers move blocks between RAM and SSD, never in or out: hits equal the spec's alone.
  auto tiers = Tiers("vbq+lru+sieve", 64, 16, "uarc");
  PolicyContext ctx;
  ctx.capacity_blocks = 64;
  auto alone = *MakePolicy("vbq+lru+sieve", ctx);
  Outcome a, b;
  uint64_t hits_tiers = 0, hits_alone = 0, ram_hits = 0;
  for (uint64_t i = 0; i < 20000; ++i) {
    // A hot set of 8 blocks per VDI (7 of 10 reads) and a wider one; every fifth access writes.
    const uint64_t block = (i % 10 < 7) ? (i * 13) % 8 : (i * 31) % 120;
    const Access x = (i % 5 == 0) ? Write((i * 7919) % 150, i % 3) : Read(block, i % 3);
    tiers->OnAccess(x, &a);
    alone->OnAccess(x, &b);
    hits_tiers += a.hit != Tier::kNone;
    hits_alone += b.hit != Tier::kNone;
    ram_hits += a.hit == Tier::kRam;
  }
  EXPECT_EQ(hits_tiers, hits_alone);
  EXPECT_GT(ram_hits, 0u);
  EXPECT_FALSE(MakeNodePolicy("uarc", "uarc", ctx).ok());
  EXPECT_FALSE(MakeNodePolicy("lru", "nonsense", ctx).ok());
}

}  // namespace
}  // namespace ringcache::policy
