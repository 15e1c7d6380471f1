#include "cachenode/policy/placement.h"

#include <random>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

BlockKey K(uint64_t b) { return BlockKey{1, b}; }

TEST(PlacementTest, LruKeepsMostRecentInRamAndDemotesExclusively) {
  auto p = *MakePlacement("lru", 2);
  std::vector<BlockKey> demote;
  EXPECT_EQ(p->OnAccess(K(1), true, &demote), Tier::kRam);
  EXPECT_EQ(p->OnAccess(K(2), true, &demote), Tier::kRam);
  EXPECT_TRUE(demote.empty());
  EXPECT_EQ(p->OnAccess(K(3), true, &demote), Tier::kRam);
  ASSERT_EQ(demote.size(), 1u);
  EXPECT_EQ(demote[0], K(1));
  EXPECT_EQ(p->TierOf(K(1)), Tier::kSsd);
  demote.clear();
  // Touching the SSD block promotes it and demotes the least recent RAM block (2).
  EXPECT_EQ(p->OnAccess(K(1), false, &demote), Tier::kRam);
  ASSERT_EQ(demote.size(), 1u);
  EXPECT_EQ(demote[0], K(2));
  EXPECT_EQ(p->ram_blocks(), 2u);
  p->OnRemove(K(3));
  EXPECT_EQ(p->ram_blocks(), 1u);
  EXPECT_EQ(p->TierOf(K(3)), Tier::kNone);
}

TEST(PlacementTest, ARamTierShrinksByItsLeastRecentBlocksAndGrowsAsBlocksAreUsed) {
  for (const char* name : {"lru", "uarc"}) {
    SCOPED_TRACE(name);
    auto p = *MakePlacement(name, 4);
    std::vector<BlockKey> demote;
    for (uint64_t b = 1; b <= 6; ++b) p->OnAccess(K(b), true, &demote);  // RAM: 6 5 4 3
    demote.clear();
    p->SetRamCapacity(2, &demote);
    EXPECT_EQ(p->ram_capacity(), 2u);
    EXPECT_EQ(p->ram_blocks(), 2u);
    ASSERT_EQ(demote.size(), 2u);
    EXPECT_EQ(demote[0], K(3));  // the least recent leave first
    EXPECT_EQ(demote[1], K(4));
    for (uint64_t b = 1; b <= 4; ++b) EXPECT_EQ(p->TierOf(K(b)), Tier::kSsd) << b;
    EXPECT_EQ(p->TierOf(K(5)), Tier::kRam);
    EXPECT_EQ(p->TierOf(K(6)), Tier::kRam);
    // A larger tier demotes nothing and takes the blocks used next.
    demote.clear();
    p->SetRamCapacity(5, &demote);
    EXPECT_TRUE(demote.empty());
    for (uint64_t b = 1; b <= 3; ++b) EXPECT_EQ(p->OnAccess(K(b), false, &demote), Tier::kRam);
    EXPECT_TRUE(demote.empty());
    EXPECT_EQ(p->ram_blocks(), 5u);
    EXPECT_EQ(p->OnAccess(K(4), false, &demote), Tier::kRam);
    EXPECT_EQ(demote.size(), 1u);
    EXPECT_EQ(p->ram_blocks(), 5u);
  }
}

TEST(PlacementTest, ZeroRamPutsEverythingOnSsd) {
  auto p = *MakePlacement("uarc", 0);
  std::vector<BlockKey> demote;
  EXPECT_EQ(p->OnAccess(K(1), true, &demote), Tier::kSsd);
  EXPECT_EQ(p->ram_blocks(), 0u);
}

TEST(PlacementTest, UnknownNameIsAnError) {
  EXPECT_EQ(MakePlacement("mru", 4).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PlacementTest, ParametersParseAndExclusiveNeedsRam) {
  auto both = MakePlacement("uarc(sieve=2,exclusive)", 8);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_TRUE((*both)->exclusive());
  EXPECT_FALSE((*MakePlacement("uarc", 8))->exclusive());
  EXPECT_FALSE((*MakePlacement("lru(exclusive)", 0))->exclusive());  // no RAM: nothing to add
  for (const char* bad : {"uarc()", "uarc(bogus)", "uarc(sieve=0)", "uarc(exclusive", "lru(,)"}) {
    EXPECT_FALSE(MakePlacement(bad, 8).ok()) << bad;
  }
}

// Random operations against a model: RAM never exceeds capacity, the accessed block is in RAM,
// demoted blocks were in RAM before and are on SSD after, and tiers are exclusive.
TEST(PlacementTest, SieveKeepsOnlyBlocksAccessedMoreThanNTimes) {
  // SE-UARC (paper 001 §V): a block leaving RAM gets an SSD slot only if accessed more than N
  // times since it entered the cache.
  auto p = *MakePlacement("uarc(sieve=1)", 4);
  std::vector<BlockKey> demote;
  p->OnAccess(BlockKey{0, 1}, true, &demote);
  p->OnAccess(BlockKey{0, 2}, true, &demote);
  p->OnAccess(BlockKey{0, 2}, false, &demote);
  EXPECT_FALSE(p->WorthSsd(BlockKey{0, 1}));  // once
  EXPECT_TRUE(p->WorthSsd(BlockKey{0, 2}));   // twice
  p->OnRemove(BlockKey{0, 2});                // leaving the cache resets the count
  p->OnAccess(BlockKey{0, 2}, true, &demote);
  EXPECT_FALSE(p->WorthSsd(BlockKey{0, 2}));
  EXPECT_TRUE((*MakePlacement("uarc", 4))->WorthSsd(BlockKey{0, 9}));  // no sieve
  for (const char* bad : {"uarc(sieve=0)", "uarc(sieve=x)", "uarc(sieve=2", "lru(window=3)"}) {
    EXPECT_EQ(MakePlacement(bad, 4).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(MakePlacement("lru(sieve=3)", 4).ok());
}

TEST(PlacementTest, RandomOpsKeepInvariants) {
  for (const char* name : {"lru", "uarc"}) {
    auto p = *MakePlacement(name, 8);
    std::mt19937_64 rng(7);
    absl::flat_hash_set<uint64_t> members;
    for (int i = 0; i < 20000; ++i) {
      const uint64_t b = rng() % 40;
      if (rng() % 10 == 0 && members.contains(b)) {
        p->OnRemove(K(b));
        members.erase(b);
        continue;
      }
      std::vector<BlockKey> demote;
      const bool admitted = members.insert(b).second;
      ASSERT_EQ(p->OnAccess(K(b), admitted, &demote), Tier::kRam) << name;
      for (const BlockKey& d : demote) {
        ASSERT_NE(d, K(b));
        ASSERT_EQ(p->TierOf(d), Tier::kSsd);
      }
      ASSERT_LE(p->ram_blocks(), 8u);
      size_t in_ram = 0;
      for (uint64_t m : members) in_ram += p->TierOf(K(m)) == Tier::kRam;
      ASSERT_EQ(in_ram, p->ram_blocks());
    }
  }
}

// UARC protects blocks seen twice: a one-pass scan does not push a re-used block out of RAM,
// while plain LRU loses it.
TEST(PlacementTest, UarcResistsScansBetterThanLru) {
  auto lru = *MakePlacement("lru", 4);
  auto uarc = *MakePlacement("uarc", 4);
  std::vector<BlockKey> d;
  for (auto* p : {lru.get(), uarc.get()}) {
    for (int rep = 0; rep < 3; ++rep) {
      for (uint64_t hot = 0; hot < 2; ++hot) p->OnAccess(K(hot), rep == 0, &d);
    }
    for (uint64_t scan = 100; scan < 104; ++scan) p->OnAccess(K(scan), true, &d);
  }
  EXPECT_EQ(lru->TierOf(K(0)), Tier::kSsd);
  EXPECT_EQ(uarc->TierOf(K(0)), Tier::kRam);
  EXPECT_EQ(uarc->TierOf(K(1)), Tier::kRam);
}

}  // namespace
}  // namespace ringcache::policy
