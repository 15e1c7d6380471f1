// Tests of SieveAdmission (sieve.h, paper 002 §III-C).
#include "cachenode/policy/sieve.h"

#include "cachenode/policy/driver.h"
#include "cachenode/policy/lru.h"
#include "cachenode/policy/registry.h"
#include "cachenode/policy/test_util.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

using testing::Read;
using testing::Write;

TEST(SieveConfigTest, Validate) {
  EXPECT_TRUE((testing::Sieve(2, 10)).Validate().ok());
  EXPECT_FALSE((testing::Sieve(0, 10)).Validate().ok());
  EXPECT_FALSE((testing::Sieve(256, 10)).Validate().ok());
}

TEST(SieveAdmissionTest, AdmitsAtExactlyTheThreshold) {
  SieveAdmission s(testing::Sieve(3, 16));
  const Access a = Read(7);
  EXPECT_FALSE(s.Admit(a));  // count 1
  EXPECT_EQ(s.CountForTest(a.key), 1u);
  EXPECT_FALSE(s.Admit(a));  // count 2
  EXPECT_TRUE(s.Admit(a));   // count 3 == threshold
  EXPECT_EQ(s.CountForTest(a.key), 0u);  // forgotten once admitted
  EXPECT_FALSE(s.Admit(a));  // starts over
}

TEST(SieveAdmissionTest, ThresholdOneAdmitsEverything) {
  SieveAdmission s(testing::Sieve(1, 4));
  EXPECT_TRUE(s.Admit(Read(1)));
  EXPECT_EQ(s.size(), 0u);
}

TEST(SieveAdmissionTest, FixedLengthForgetsTheLeastRecent) {
  SieveAdmission s(testing::Sieve(2, 2));
  EXPECT_FALSE(s.Admit(Read(1)));
  EXPECT_FALSE(s.Admit(Read(2)));
  EXPECT_FALSE(s.Admit(Read(3)));  // sieve holds 3, 2: 1 forgotten
  EXPECT_EQ(s.size(), 2u);
  EXPECT_FALSE(s.Admit(Read(1)));  // count restarts at 1
  EXPECT_TRUE(s.Admit(Read(3)));   // 3 still remembered -> count 2
}

TEST(SieveAdmissionTest, InDriverReadsAreSievedWritesAreCached) {
  DriverParts parts;
  parts.make_space = [](SlotTable* t) {
    return std::make_unique<GlobalSpace>(
        4, t, [](SlotTable* s, size_t) { return std::make_unique<LruOrder>(s); });
  };
  parts.admission = std::make_unique<SieveAdmission>(testing::Sieve(2, 8));
  auto cache = *CacheDriver::Create(DriverConfig{"lru+sieve", 4}, std::move(parts));
  Outcome out;
  cache->OnAccess(Read(1), &out);
  EXPECT_TRUE(out.rejected);
  EXPECT_FALSE(out.admitted);
  EXPECT_EQ(out.ssd_writes, 0u);
  cache->OnAccess(Read(1), &out);
  EXPECT_TRUE(out.admitted);
  EXPECT_EQ(out.ssd_writes, 1u);
  cache->OnAccess(Read(1), &out);
  EXPECT_EQ(out.hit, Tier::kSsd);
  cache->OnAccess(Write(2), &out);  // write-back: cached on first write
  EXPECT_TRUE(out.admitted);
  EXPECT_EQ(cache->dirty_count(), 1u);
}

SieveConfig FreqSieve(double margin, uint32_t region = 0) {
  SieveConfig c = testing::Sieve(2, 64);
  c.freq = true;
  c.margin = margin;
  c.capacity = 4096;
  c.region = region;
  return c;
}

// Counts `n` accesses of `block` (as the driver does before Admit).
void Seen(SieveAdmission& s, uint64_t block, int n) {
  for (int i = 0; i < n; ++i) s.OnAccess(Read(block), /*hit=*/false);
}

TEST(FrequencyGateTest, AdmitsEveryFirstMissUntilTheFirstEviction) {
  SieveAdmission s(FreqSieve(3));
  Seen(s, 1, 1);
  EXPECT_TRUE(s.Admit(Read(1)));  // an empty cache: nothing to displace
  EXPECT_EQ(s.size(), 0u);
}

TEST(FrequencyGateTest, AdmitsAFirstMissMoreFrequentThanTheVictimsByTheMargin) {
  SieveAdmission s(FreqSieve(3));
  s.OnEvicted(BlockKey{0, 999});  // a victim never read: estimate 0, the bar
  Seen(s, 1, 4);                  // 4 > 0 + 3
  EXPECT_TRUE(s.Admit(Read(1)));
  EXPECT_EQ(s.CountForTest(Read(1).key), 0u);  // admitted at once, not remembered
  Seen(s, 2, 3);                  // 3 is not above 0 + 3: the sieve's rule applies
  EXPECT_FALSE(s.Admit(Read(2)));
  EXPECT_EQ(s.CountForTest(Read(2).key), 1u);
  Seen(s, 2, 1);
  EXPECT_TRUE(s.Admit(Read(2)));  // its second miss within the sieve's memory
}

TEST(FrequencyGateTest, TheBarRisesWithTheVictimsPopularity) {
  SieveAdmission s(FreqSieve(1));
  Seen(s, 500, 8);
  for (int i = 0; i < 300; ++i) s.OnEvicted(BlockKey{0, 500});  // every recent victim read 8 times
  Seen(s, 1, 6);  // popular, but less than what the cache evicts
  EXPECT_FALSE(s.Admit(Read(1)));
  Seen(s, 2, 10);  // 10 > 8 + 1
  EXPECT_TRUE(s.Admit(Read(2)));
}

// seen=1: the block sketch is the sieve's memory too. A block read once, then again after the
// sieve-LRU (8 keys here) forgot it, is admitted at its second miss; without seen it starts over.
TEST(FrequencyGateTest, ABlockTheSketchSawBeforeIsAdmittedAfterTheSieveForgotIt) {
  for (bool seen : {false, true}) {
    SCOPED_TRACE(seen);
    SieveConfig c = FreqSieve(3);
    c.length = 8;
    c.seen = seen;
    SieveAdmission s(c);
    s.OnEvicted(BlockKey{0, 100'000});  // the bar: a victim never read
    Seen(s, 1, 1);
    EXPECT_FALSE(s.Admit(Read(1)));  // a first miss: the sieve remembers it
    for (uint64_t b = 10; b < 30; ++b) {  // 20 other first misses push it out of the sieve
      Seen(s, b, 1);
      EXPECT_FALSE(s.Admit(Read(b)));
    }
    EXPECT_EQ(s.CountForTest(Read(1).key), 0u);
    Seen(s, 1, 1);
    EXPECT_EQ(s.Admit(Read(1)), seen);
  }
  SieveConfig bad = FreqSieve(3);
  bad.freq = false;
  bad.seen = true;
  EXPECT_FALSE(bad.Validate().ok());  // the sketch is its memory
}

// writes=1: a write miss goes through the same tests in the driver. Until the first eviction
// every miss is admitted; after it, a block written for the first time is refused (the caller
// writes it around, no SSD write) and the same block written again is admitted, dirty.
TEST(FrequencyGateTest, WithWritesJudgedAFirstWriteGoesAroundASecondIsCached) {
  PolicyContext ctx;
  ctx.capacity_blocks = 4;
  auto cache = MakePolicy("lru+sieve(freq=1,seen=1,writes=1)", ctx);
  ASSERT_TRUE(cache.ok()) << cache.status();
  Outcome out;
  for (uint64_t b = 1; b <= 4; ++b) {
    (*cache)->OnAccess(Write(b), &out);
    EXPECT_TRUE(out.admitted) << b;  // nothing evicted yet
  }
  (*cache)->OnAccess(Write(5), &out);  // still nothing evicted: admitted, and 1 leaves
  EXPECT_TRUE(out.admitted);
  EXPECT_EQ(out.evicted.size(), 1u);
  (*cache)->OnAccess(Write(6), &out);  // a block never seen, after an eviction
  EXPECT_TRUE(out.rejected);
  EXPECT_FALSE(out.admitted);
  EXPECT_EQ(out.ssd_writes, 0u);
  EXPECT_EQ((*cache)->Lookup(Write(6).key), Tier::kNone);
  (*cache)->OnAccess(Write(6), &out);  // written again: seen before
  EXPECT_TRUE(out.admitted);
  EXPECT_EQ(out.ssd_writes, 1u);
  // Without writes=1 the same write is cached at once (write-back caches every write).
  auto plain = MakePolicy("lru+sieve(freq=1,seen=1)", ctx);
  ASSERT_TRUE(plain.ok());
  for (uint64_t b = 1; b <= 5; ++b) (*plain)->OnAccess(Write(b), &out);
  (*plain)->OnAccess(Write(6), &out);
  EXPECT_TRUE(out.admitted);
  EXPECT_FALSE(MakePolicy("lru+sieve(seen=1)", ctx).ok());
}

// The region test: re-references count for their region of 64 blocks; a first miss in a region
// read again lately passes, a scan (nothing read again) never does.
TEST(FrequencyGateTest, AFirstMissInARegionReadAgainPasses) {
  SieveAdmission s(FreqSieve(3, 64));
  s.OnEvicted(BlockKey{0, 100'000});  // a victim in a region never read again: the bar 0
  for (uint64_t b = 640; b < 644; ++b) Seen(s, b, 2);  // region 10: four re-references
  Seen(s, 650, 1);                                      // a block of region 10 not read before
  EXPECT_TRUE(s.Admit(Read(650)));
  for (uint64_t b = 1280; b < 1340; ++b) Seen(s, b, 1);  // region 20: a scan
  Seen(s, 1340, 1);
  EXPECT_FALSE(s.Admit(Read(1340)));
  SieveAdmission blocks_only(FreqSieve(3, 0));
  blocks_only.OnEvicted(BlockKey{0, 100'000});
  for (uint64_t b = 640; b < 644; ++b) Seen(blocks_only, b, 2);
  Seen(blocks_only, 650, 1);
  EXPECT_FALSE(blocks_only.Admit(Read(650)));
}

// The region test has a margin of its own when `region_margin` is set (else the block test's).
TEST(FrequencyGateTest, TheRegionTestsMarginIsItsOwnWhenSet) {
  auto region_read_again = [](SieveConfig c) {
    SieveAdmission s(c);
    s.OnEvicted(BlockKey{0, 100'000});                    // the bar 0
    for (uint64_t b = 640; b < 644; ++b) Seen(s, b, 2);  // region 10: four re-references
    Seen(s, 650, 1);
    return s.Admit(Read(650));
  };
  SieveConfig c = FreqSieve(3, 64);
  EXPECT_TRUE(region_read_again(c));  // 4 > 0 + 3
  c.region_margin = 4;
  EXPECT_FALSE(region_read_again(c));  // 4 is not above 0 + 4
  c = FreqSieve(4, 64);
  EXPECT_FALSE(region_read_again(c));  // the block test's margin, shared
  c.region_margin = 3;
  EXPECT_TRUE(region_read_again(c));
  c.region_margin = 16;
  EXPECT_FALSE(c.Validate().ok());
}

TEST(RegionTunerTest, MostlyWastedRaisesTheMarginMostlyReadAgainLowersIt) {
  RegionTuner t(3, 0.5);
  for (uint32_t i = 0; i < RegionTuner::kWindow - 1; ++i) t.OnOutcome(i % 3 == 0);
  EXPECT_EQ(t.margin(), 3);  // not a whole window yet
  t.OnOutcome(false);        // 2 in 3 wasted
  EXPECT_EQ(t.margin(), 4);
  for (uint32_t i = 0; i < RegionTuner::kWindow; ++i) t.OnOutcome(i % 2 == 0);
  EXPECT_EQ(t.margin(), 4);  // half wasted: between the two bounds
  for (uint32_t i = 0; i < RegionTuner::kWindow; ++i) t.OnOutcome(i % 8 != 0);
  EXPECT_EQ(t.margin(), 3);  // one in eight wasted
  for (int w = 0; w < 20; ++w) {
    for (uint32_t i = 0; i < RegionTuner::kWindow; ++i) t.OnOutcome(true);
  }
  EXPECT_EQ(t.margin(), RegionTuner::kMin);
  for (int w = 0; w < 20; ++w) {
    for (uint32_t i = 0; i < RegionTuner::kWindow; ++i) t.OnOutcome(false);
  }
  EXPECT_EQ(t.margin(), RegionTuner::kMax);
}

// With region_adapt, what the region test's blocks do moves its margin for their VDI.
TEST(FrequencyGateTest, TheRegionTestsAdmissionsMoveItsMargin) {
  for (bool read_again : {false, true}) {
    SieveConfig c = FreqSieve(3, 128);
    c.region_adapt = true;
    SieveAdmission s(c);
    s.OnEvicted(BlockKey{0, 100'000});                    // the bar 0
    for (uint64_t b = 640; b < 644; ++b) Seen(s, b, 2);  // region 5: four re-references
    std::vector<uint64_t> admitted;
    for (uint64_t b = 650; admitted.size() < RegionTuner::kWindow; ++b) {
      Seen(s, b, 1);
      ASSERT_TRUE(s.Admit(Read(b))) << b;
      admitted.push_back(b);
    }
    EXPECT_EQ(s.RegionMarginForTest(0), 3);
    for (uint64_t b : admitted) {
      if (read_again) {
        s.OnAccess(Read(b), /*hit=*/true);
      } else {
        s.OnEvicted(BlockKey{0, b});
      }
    }
    EXPECT_EQ(s.RegionMarginForTest(0), read_again ? 2 : 4) << read_again;
    VdiStats rows[2];
    rows[0].vdi = 0;
    rows[1].vdi = 1;
    s.AnnotateVdiStats(rows);  // the VDI's margin in its stats row; none for another VDI
    EXPECT_EQ(rows[0].region_margin, read_again ? 2 : 4);
    EXPECT_EQ(rows[1].region_margin, -1);
    EXPECT_EQ(s.RegionMarginForTest(1), 3) << "another VDI keeps its own";
    EXPECT_EQ(s.RegionAdmittedForTest(), 0u);
  }
}

// Blocks the region test admitted that leave without an eviction (trimmed) are never seen
// leaving: the set that follows them stays within twice the cache's blocks.
TEST(FrequencyGateTest, TheRegionTestsWatchListStaysBounded) {
  SieveConfig c = FreqSieve(3, 1024);
  c.capacity = 64;
  c.region_adapt = true;
  SieveAdmission s(c);
  s.OnEvicted(BlockKey{0, 100'000});
  for (uint64_t b = 0; b < 4; ++b) Seen(s, b, 2);  // region 0: four re-references
  for (uint64_t b = 10; b < 600; ++b) {
    Seen(s, b, 1);
    ASSERT_TRUE(s.Admit(Read(b))) << b;
    EXPECT_LE(s.RegionAdmittedForTest(), 2 * c.capacity);
  }
}

TEST(BudgetTunerTest, WritesPerHitAboveTheBudgetRaiseTheMarginWellUnderItLowerIt) {
  BudgetTuner t(2);  // 2 SSD writes per read hit
  EXPECT_EQ(BudgetTuner::HitsToCount(2), 1u);
  EXPECT_EQ(BudgetTuner::HitsToCount(0.5), 3u);  // 1 / (0.75 x 0.5) = 2.67 hits to pay in full
  for (uint32_t i = 0; i < BudgetTuner::kWindow - 1; ++i) t.OnOutcome(i % 3 == 0 ? 1 : 0);
  EXPECT_EQ(t.margin(), 0u);  // not a whole window yet
  t.OnOutcome(0);             // 64 writes for 21 hits: 3 per hit
  EXPECT_EQ(t.margin(), 1u);
  for (uint32_t i = 0; i < BudgetTuner::kWindow; ++i) t.OnOutcome(i % 2);
  EXPECT_EQ(t.margin(), 1u);  // 2 per hit: within the budget, above 3/4 of it
  for (uint32_t i = 0; i < BudgetTuner::kWindow; ++i) t.OnOutcome(i % 4 == 0 ? 0 : 1);
  EXPECT_EQ(t.margin(), 0u);  // 1.33 per hit: under 1.5
  t.OnOutcome(1);
  for (int w = 0; w < 20; ++w) {
    for (uint32_t i = 0; i < BudgetTuner::kWindow; ++i) t.OnOutcome(0);  // nothing read again
  }
  EXPECT_EQ(t.margin(), BudgetTuner::kMax);
  BudgetTuner tight(0.5);  // two hits per SSD write: an admission read once does not pay
  for (uint32_t i = 0; i < BudgetTuner::kWindow; ++i) tight.OnOutcome(1);
  EXPECT_EQ(tight.margin(), 1u);
  for (uint32_t i = 0; i < BudgetTuner::kWindow; ++i) tight.OnOutcome(3);
  EXPECT_EQ(tight.margin(), 0u);  // 0.33 per hit
}

// budget=B: the admissions of a VDI are followed; while they are not read again the VDI's margin
// rises, and each test then asks for one access more (here the seen test: a block seen twice is
// no longer enough); admissions that are read again bring it back down.
TEST(FrequencyGateTest, TheWriteBudgetsMarginFollowsTheAdmissionsHits) {
  SieveConfig c = FreqSieve(15);
  c.seen = true;
  c.budget = 2;
  ASSERT_TRUE(c.Validate().ok());
  SieveAdmission s(c);
  s.OnEvicted(BlockKey{0, 100'000});  // the bar: a victim never read
  const auto window = [&](uint64_t first, bool read_again) {
    for (uint64_t b = first; b < first + BudgetTuner::kWindow; ++b) {
      Seen(s, b, 3);
      EXPECT_TRUE(s.Admit(Read(b))) << b;  // seen before, 3 > 1 + the margin (0 or 1)
      if (read_again) {
        s.OnAccess(Read(b), /*hit=*/true);
      } else {
        s.OnEvicted(BlockKey{0, b});
      }
    }
  };
  EXPECT_EQ(s.BudgetMarginForTest(0), 0u);
  window(1000, false);  // 64 SSD writes, no hit
  EXPECT_EQ(s.BudgetMarginForTest(0), 1u);
  EXPECT_EQ(s.BudgetFollowedForTest(), 0u);
  Seen(s, 5000, 2);  // seen once before this miss: 2 is not above 1 + 1
  EXPECT_FALSE(s.Admit(Read(5000)));
  VdiStats row;
  row.vdi = 0;
  s.AnnotateVdiStats(absl::MakeSpan(&row, 1));
  EXPECT_EQ(row.budget_margin, 1);
  EXPECT_EQ(s.BudgetMarginForTest(1), 0u) << "another VDI has its own";
  window(2000, true);  // each read again: 1 write per hit
  EXPECT_EQ(s.BudgetMarginForTest(0), 0u);
  Seen(s, 6000, 2);
  EXPECT_TRUE(s.Admit(Read(6000)));

  SieveConfig none = FreqSieve(3);  // no budget: nothing followed, no margin shown
  none.seen = true;
  SieveAdmission n(none);
  n.OnEvicted(BlockKey{0, 100'000});
  Seen(n, 7, 2);
  EXPECT_TRUE(n.Admit(Read(7)));
  EXPECT_EQ(n.BudgetFollowedForTest(), 0u);
  row = VdiStats{};
  n.AnnotateVdiStats(absl::MakeSpan(&row, 1));
  EXPECT_EQ(row.budget_margin, -1);

  SieveConfig bad = testing::Sieve(2, 64);
  bad.budget = 2;
  EXPECT_FALSE(bad.Validate().ok());  // nothing to tune without freq or adapt
  bad.budget = -1;
  EXPECT_FALSE(bad.Validate().ok());
}

// The sieve's own threshold rises with the margin too: with the margin at 1, a block missed twice
// within the sieve's memory is no longer admitted, one missed three times is.
TEST(FrequencyGateTest, TheWriteBudgetsMarginRaisesTheSievesThreshold) {
  SieveConfig c = FreqSieve(15);
  c.budget = 2;
  SieveAdmission s(c);
  s.OnEvicted(BlockKey{0, 100'000});
  for (uint64_t b = 1000; b < 1000 + BudgetTuner::kWindow; ++b) {
    Seen(s, b, 1);
    ASSERT_FALSE(s.Admit(Read(b)));
    Seen(s, b, 1);
    ASSERT_TRUE(s.Admit(Read(b)));  // the sieve's second miss
    s.OnEvicted(BlockKey{0, b});    // never read again
  }
  ASSERT_EQ(s.BudgetMarginForTest(0), 1u);
  for (int i = 0; i < 2; ++i) {
    Seen(s, 9, 1);
    EXPECT_FALSE(s.Admit(Read(9))) << i;
  }
  Seen(s, 9, 1);
  EXPECT_TRUE(s.Admit(Read(9)));
}

TEST(FrequencyGateTest, OffByDefaultAndValidated) {
  SieveConfig c = testing::Sieve(2, 64);
  EXPECT_FALSE(c.freq);
  SieveAdmission plain(c);
  plain.OnEvicted(BlockKey{0, 1});  // no sketch: nothing happens
  Seen(plain, 1, 10);
  EXPECT_FALSE(plain.Admit(Read(1)));  // the paper's sieve: a first miss is never admitted
  c.freq = true;
  EXPECT_FALSE(c.Validate().ok());  // no capacity to size the sketch
  c = FreqSieve(-1);
  EXPECT_FALSE(c.Validate().ok());
  c = FreqSieve(16);
  EXPECT_FALSE(c.Validate().ok());
  c = FreqSieve(3, 48);  // not a power of two
  EXPECT_FALSE(c.Validate().ok());
  c = FreqSieve(3, 1);  // a region of one block is the block test
  EXPECT_FALSE(c.Validate().ok());
  EXPECT_TRUE(FreqSieve(0).Validate().ok());
}

// The driver reports every eviction to the admission (the frequency gate's bar).
class EvictionCounter final : public Admission {
 public:
  std::string_view name() const override { return "count"; }
  bool Admit(const Access&) override { return true; }
  void OnEvicted(const BlockKey& key) override { evicted.push_back(key.block); }
  size_t MetadataBytes() const override { return 0; }
  std::vector<uint64_t> evicted;
};

TEST(FrequencyGateTest, TheDriverReportsEvictionsToTheAdmission) {
  DriverParts parts;
  parts.make_space = [](SlotTable* t) {
    return std::make_unique<GlobalSpace>(
        2, t, [](SlotTable* s, size_t) { return std::make_unique<LruOrder>(s); });
  };
  auto counter = std::make_unique<EvictionCounter>();
  EvictionCounter* seen = counter.get();
  parts.admission = std::move(counter);
  auto cache = *CacheDriver::Create(DriverConfig{"lru+count", 2}, std::move(parts));
  Outcome out;
  for (uint64_t b : {1, 2, 3, 4}) cache->OnAccess(Read(b), &out);
  EXPECT_EQ(seen->evicted, (std::vector<uint64_t>{1, 2}));

  PolicyContext ctx;
  ctx.capacity_blocks = 8;
  EXPECT_TRUE(MakePolicy("vbq(share=utility)+s3fifo+sieve(freq=1)+lcr", ctx).ok());
  EXPECT_TRUE(MakePolicy("lru+sieve(freq=1,margin=0)", ctx).ok());
  EXPECT_FALSE(MakePolicy("lru+sieve(freq=2)", ctx).ok());
  EXPECT_FALSE(MakePolicy("lru+sieve(freq=1,margin=20)", ctx).ok());
  EXPECT_TRUE(MakePolicy("lru+sieve(freq=1,region=0)", ctx).ok());
  EXPECT_FALSE(MakePolicy("lru+sieve(freq=1,region=100)", ctx).ok());
  EXPECT_TRUE(MakePolicy("lru+sieve(freq=1,margin=6,region_margin=3)", ctx).ok());
  EXPECT_FALSE(MakePolicy("lru+sieve(freq=1,region_margin=30)", ctx).ok());
  EXPECT_TRUE(MakePolicy("lru+sieve(freq=1,region_adapt=1)", ctx).ok());
}

}  // namespace
}  // namespace ringcache::policy
