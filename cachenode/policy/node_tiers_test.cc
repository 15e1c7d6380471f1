// Tests of NodeTiers (node_tiers.h): the cache node's RAM/SSD rules as the simulator runs them.
#include "cachenode/policy/node_tiers.h"

#include "cachenode/policy/registry.h"
#include "cachenode/policy/shadow_queue.h"
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

TEST(NodeTiersTest, ExclusiveRamAddsCapacity) {
  // Read-only, every miss admitted: with exclusive tiers the node holds SSD + RAM blocks, so its
  // hits are those of one LRU of that size (paper 001's UARC: "the RAM tier adds capacity"),
  // and the slots used never exceed the SSD's.
  constexpr size_t kSsd = 64, kRam = 32;
  auto exclusive = Tiers("lru", kSsd, kRam, "lru(exclusive)");
  auto copies = Tiers("lru", kSsd, kRam, "lru");
  PolicyContext ctx;
  ctx.capacity_blocks = kSsd + kRam;
  auto bigger = *MakePolicy("lru", ctx);
  EXPECT_EQ(exclusive->capacity(), kSsd + kRam);
  EXPECT_EQ(copies->capacity(), kSsd);
  const auto& tiers = dynamic_cast<const NodeTiers&>(*exclusive);
  Outcome a, b, c;
  uint64_t hits_exclusive = 0, hits_copies = 0, hits_bigger = 0;
  for (uint64_t i = 0; i < 30000; ++i) {
    const uint64_t block = (i * 2654435761u) % 90 + ((i % 7 == 0) ? (i % 40) * 100 : 0);
    const Access x = Read(block);
    exclusive->OnAccess(x, &a);
    copies->OnAccess(x, &b);
    bigger->OnAccess(x, &c);
    hits_exclusive += a.hit != Tier::kNone;
    hits_copies += b.hit != Tier::kNone;
    hits_bigger += c.hit != Tier::kNone;
    ASSERT_LE(tiers.used_slots(), kSsd);
    ASSERT_LE(tiers.ram_blocks(), kRam);
  }
  EXPECT_EQ(hits_exclusive, hits_bigger);
  EXPECT_GT(hits_exclusive, hits_copies + 1000);
}

TEST(NodeTiersTest, ExclusiveSlotPressureTakesShadowSlotsFirstThenMembers) {
  auto t = Tiers("lru", 2, 1, "lru(exclusive)");  // 2 slots + 1 RAM block: 3 members
  const auto& tiers = dynamic_cast<const NodeTiers&>(*t);
  Outcome out;
  t->OnAccess(Read(1), &out);  // RAM
  t->OnAccess(Read(2), &out);  // 1 demoted into a slot
  EXPECT_EQ(out.ssd_writes, 1u);
  t->OnAccess(Read(1), &out);  // SSD hit: promoted, keeping its slot as a shadow; 2 demoted
  EXPECT_EQ(out.promotions, 1u);
  EXPECT_EQ(tiers.used_slots(), 2u);
  t->OnAccess(Read(3), &out);  // a third member (the RAM tier's): 1 leaves RAM for its shadow
  EXPECT_EQ(out.ssd_writes, 0u);
  EXPECT_TRUE(out.evicted.empty());
  EXPECT_EQ(t->size(), 3u);
  // 1 is promoted again; 3 must leave RAM and both slots are taken: 1's shadow slot goes, and
  // nothing leaves the cache.
  t->OnAccess(Read(1), &out);
  EXPECT_TRUE(out.evicted.empty());
  EXPECT_EQ(out.ssd_writes, 1u);
  EXPECT_EQ(tiers.used_slots(), 2u);
  EXPECT_EQ(t->Lookup(BlockKey{0, 3}), Tier::kSsd);
  EXPECT_EQ(t->Lookup(BlockKey{0, 1}), Tier::kRam);
  // A write needs a slot and no shadow is left: the policy sheds its LRU member, 2.
  t->OnAccess(Write(4), &out);
  ASSERT_FALSE(out.evicted.empty());
  EXPECT_EQ(out.evicted[0].key, (BlockKey{0, 2}));
  EXPECT_LE(tiers.used_slots(), 2u);
  EXPECT_EQ(t->Lookup(BlockKey{0, 4}), Tier::kRam);
  EXPECT_EQ(t->dirty_count(), 1u);
  // Destaged (MarkClean): the block keeps its slot, as a shadow.
  const size_t used = tiers.used_slots();
  EXPECT_TRUE(t->MarkClean(BlockKey{0, 4}));
  EXPECT_EQ(tiers.used_slots(), used);
}

TEST(NodeTiersTest, ExclusiveSlotsNeverOverflowUnderWrites) {
  // A random mix of reads and writes over 3 VDIs: the slots used stay within the SSD, every
  // dirty block keeps a slot (dirty_count() <= used slots), the membership within SSD + RAM.
  constexpr size_t kSsd = 50, kRam = 20;
  auto t = Tiers("vbq(share=utility)+s3fifo+sieve", kSsd, kRam, "uarc(exclusive)");
  const auto& tiers = dynamic_cast<const NodeTiers&>(*t);
  Outcome out;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 40000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const uint32_t vdi = x % 3;
    const uint64_t block = (x >> 8) % (vdi == 0 ? 40 : 200);
    t->OnAccess((x >> 40) % 4 == 0 ? Write(block, vdi) : Read(block, vdi), &out);
    if (i % 97 == 0) t->MarkClean(BlockKey{vdi, block});
    ASSERT_LE(tiers.used_slots(), kSsd) << i;
    ASSERT_LE(t->dirty_count(), tiers.used_slots()) << i;
    ASSERT_LE(t->size(), kSsd + kRam) << i;
  }
}

TEST(ShadowQueueTest, OldestLiveFirstAndStaleEntriesDoNotPileUp) {
  absl::flat_hash_set<BlockKey> live;
  auto is_shadow = [&live](const BlockKey& k) { return live.contains(k); };
  ShadowQueue q;
  for (uint64_t b = 0; b < 5; ++b) {
    live.insert({0, b});
    q.Push({0, b}, live.size(), is_shadow);
  }
  live.erase(BlockKey{0, 0});  // written since: no longer a shadow
  EXPECT_EQ(q.PopOldest(is_shadow), (BlockKey{0, 1}));
  // One block becoming a shadow again and again, stale in between: the queue stays bounded.
  for (int i = 0; i < 100000; ++i) q.Push({0, 3}, live.size(), is_shadow);
  EXPECT_LE(q.size(), 2 * live.size() + 1024 + 1);
  EXPECT_EQ(q.PopOldest(is_shadow), (BlockKey{0, 2}));
  EXPECT_EQ(q.PopOldest(is_shadow), (BlockKey{0, 3}));
  EXPECT_EQ(q.PopOldest(is_shadow), (BlockKey{0, 4}));
  live.clear();
  EXPECT_EQ(q.PopOldest(is_shadow), std::nullopt);
}

}  // namespace
}  // namespace ringcache::policy
