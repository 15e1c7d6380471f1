// Tests of FreqSketch (freq_sketch.h).
#include "cachenode/policy/freq_sketch.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

BlockKey Key(uint64_t block, uint32_t vdi = 0) { return BlockKey{vdi, block}; }

TEST(FreqSketchTest, CountsEachKeyUpToFifteen) {
  FreqSketch s(1024);
  for (int i = 0; i < 7; ++i) s.Increment(Key(1));
  for (int i = 0; i < 30; ++i) s.Increment(Key(2));
  EXPECT_EQ(s.Estimate(Key(1)), 7u);
  EXPECT_EQ(s.Estimate(Key(2)), FreqSketch::kMaxCount);
  EXPECT_EQ(s.Estimate(Key(3)), 0u);
  EXPECT_EQ(s.Estimate(Key(1, 1)), 0u);  // another VDI's block 1
}

TEST(FreqSketchTest, NeverCountsLessThanTheAccessesSinceTheLastAging) {
  // 2,000 keys, 4,000 increments, in a sketch of 1,024 counters a row: collisions only add.
  FreqSketch s(1024, /*sample=*/1'000'000);
  for (uint64_t k = 0; k < 2000; ++k) {
    for (uint64_t i = 0; i < k % 5; ++i) s.Increment(Key(k));
  }
  int exact = 0;
  for (uint64_t k = 0; k < 2000; ++k) {
    EXPECT_GE(s.Estimate(Key(k)), k % 5) << k;
    exact += s.Estimate(Key(k)) == k % 5;
  }
  EXPECT_GT(exact, 1000);  // and mostly exact, with two keys per counter
}

TEST(FreqSketchTest, AgingHalvesEveryCounter) {
  FreqSketch s(1 << 16, /*sample=*/100);
  EXPECT_EQ(s.sample(), 100u);
  for (int i = 0; i < 13; ++i) s.Increment(Key(1));
  for (int i = 0; i < 9; ++i) s.Increment(Key(2));
  EXPECT_EQ(s.agings(), 0u);
  for (uint64_t k = 100; s.agings() == 0; ++k) s.Increment(Key(k));
  EXPECT_EQ(s.Estimate(Key(1)), 6u);  // 13 / 2
  EXPECT_EQ(s.Estimate(Key(2)), 4u);  // 9 / 2: neighbours in a byte do not leak into each other
}

TEST(FreqSketchTest, SizedByTheCapacity) {
  FreqSketch small(10);
  EXPECT_EQ(small.width(), 64u);
  EXPECT_EQ(small.sample(), 100u);
  FreqSketch big(5000);
  EXPECT_EQ(big.width(), 32768u);  // four counters a row per block: 16 per block in all
  EXPECT_EQ(big.sample(), 50000u);
  EXPECT_LE(big.MemoryBytes(), sizeof(FreqSketch) + 4 * 32768 / 2);  // about 13 bytes a block
}

}  // namespace
}  // namespace ringcache::policy
