// Tests of the reference computations against each other and against hand-worked examples.
#include "tools/sim/reference.h"

#include "gtest/gtest.h"
#include "tools/sim/generators.h"

namespace ringcache::sim {
namespace {

using policy::BlockKey;
using policy::kNever;

std::vector<BlockKey> Keys(const std::vector<uint64_t>& blocks) {
  std::vector<BlockKey> out;
  for (uint64_t b : blocks) out.push_back(BlockKey{0, b});
  return out;
}

std::vector<BlockKey> RandomKeys(uint64_t seed, size_t n, uint64_t distinct) {
  Rng rng(seed);
  std::vector<BlockKey> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(BlockKey{static_cast<uint32_t>(rng.Below(2)), rng.Below(distinct)});
  }
  return out;
}

TEST(SimReference, StackDistancesByHand) {
  // a b c a b b d a: the last a has b and d in between, distance 3
  auto d = LruStackDistances(Keys({1, 2, 3, 1, 2, 2, 4, 1}));
  EXPECT_EQ(d, (std::vector<uint64_t>{kNever, kNever, kNever, 3, 3, 1, kNever, 3}));
  EXPECT_EQ(LruHitsFromDistances(d, 1), 1u);
  EXPECT_EQ(LruHitsFromDistances(d, 2), 1u);
  EXPECT_EQ(LruHitsFromDistances(d, 3), 4u);
  EXPECT_EQ(LruHitsFromDistances(d, 4), 4u);
}

TEST(SimReference, FastAndNaiveStackDistancesAgree) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto keys = RandomKeys(seed, 500, 5 + seed * 3);
    EXPECT_EQ(LruStackDistances(keys), LruStackDistancesNaive(keys)) << seed;
  }
}

TEST(SimReference, FifoByHand) {
  // capacity 2: a b a c a b  -> a miss, b miss, a hit, c miss (evicts a), a miss (evicts b),
  // b miss (evicts c)
  EXPECT_EQ(FifoHits(Keys({1, 2, 1, 3, 1, 2}), 2), 1u);
}

TEST(SimReference, BruteForceOptByHand) {
  // capacity 1: A B A. Demand paging gets 0 hits; with bypass, keep A and skip B: 1 hit.
  EXPECT_EQ(*BruteForceOptHits(Keys({1, 2, 1}), 1, false), 0u);
  EXPECT_EQ(*BruteForceOptHits(Keys({1, 2, 1}), 1, true), 1u);
  // Classic: capacity 3 on 1 2 3 4 1 2 5 1 2 3 4 5 -> Belady's MIN has 7 misses, 5 hits.
  auto k = Keys({1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5});
  EXPECT_EQ(*BruteForceOptHits(k, 3, false), 5u);
  EXPECT_EQ(BeladyHits(k, 3, false), 5u);
}

TEST(SimReference, BeladyMatchesBruteForceOnRandomTinyTraces) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    auto keys = RandomKeys(seed, 24, 4);  // up to 8 distinct keys
    for (uint64_t cap = 1; cap <= 5; ++cap) {
      EXPECT_EQ(BeladyHits(keys, cap, true), *BruteForceOptHits(keys, cap, true))
          << "seed " << seed << " cap " << cap;
      EXPECT_EQ(BeladyHits(keys, cap, false), *BruteForceOptHits(keys, cap, false))
          << "seed " << seed << " cap " << cap;
      // OPT bounds LRU and FIFO.
      uint64_t lru = LruHitsFromDistances(LruStackDistances(keys), cap);
      EXPECT_GE(BeladyHits(keys, cap, false), lru);
      EXPECT_GE(BeladyHits(keys, cap, false), FifoHits(keys, cap));
    }
  }
}

TEST(SimReference, BruteForceRefusesLargeInputs) {
  std::vector<BlockKey> keys;
  for (uint64_t b = 0; b < 30; ++b) keys.push_back(BlockKey{0, b});
  EXPECT_FALSE(BruteForceOptHits(keys, 2, true).ok());
}

}  // namespace
}  // namespace ringcache::sim
