// Tests of CmfBypass (cmf.h, paper 003 §II).
#include "cachenode/policy/cmf.h"

#include "cachenode/policy/driver.h"
#include "cachenode/policy/lru.h"
#include "cachenode/policy/test_util.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

using testing::Read;
using testing::Write;

CmfConfig Small() {
  CmfConfig c;
  c.miss_threshold = 0.8;
  c.window = 10;
  c.check_interval_us = 1000;
  c.reenable_ops = 5;
  return c;
}

TEST(CmfConfigTest, Validate) {
  EXPECT_TRUE(CmfConfig{}.Validate().ok());
  CmfConfig c = Small();
  c.window = 0;
  EXPECT_FALSE(c.Validate().ok());
  c = Small();
  c.miss_threshold = 1.0;
  EXPECT_FALSE(c.Validate().ok());
}

TEST(CmfBypassTest, ExactlyEightyPercentMissesKeepsCachingOn) {
  CmfBypass cmf(Small());
  for (int i = 0; i < 8; ++i) EXPECT_FALSE(cmf.Check(Read(i), /*hit=*/false));
  EXPECT_FALSE(cmf.Check(Read(100), true));
  EXPECT_FALSE(cmf.Check(Read(100), true));  // window closes: 8/10 is not > 80%
  EXPECT_FALSE(cmf.IsOff(0));
}

TEST(CmfBypassTest, MoreThanEightyPercentTurnsOffThatVdiOnly) {
  CmfBypass cmf(Small());
  for (int i = 0; i < 9; ++i) EXPECT_FALSE(cmf.Check(Read(i), false));
  EXPECT_FALSE(cmf.Check(Read(100, 1), false));  // VDI 1 counts separately
  EXPECT_TRUE(cmf.Check(Read(9), true));  // 9/10 misses: off (this access already goes around)
  EXPECT_TRUE(cmf.IsOff(0));
  EXPECT_FALSE(cmf.IsOff(1));
  EXPECT_TRUE(cmf.Check(Write(50), false));
  EXPECT_FALSE(cmf.Check(Read(101, 1), false));
  EXPECT_EQ(cmf.turned_off(), 1u);
}

TEST(CmfBypassTest, PeriodicCheckTurnsCachingBackOnWhenTheRateDrops) {
  CmfBypass cmf(Small());
  uint64_t t = 0;
  for (int i = 0; i < 10; ++i) cmf.Check(Read(i, 0, t), false);  // off at t = 0
  ASSERT_TRUE(cmf.IsOff(0));
  // First interval [0, 1000): 9 more accesses -> at t = 1000, 9 >= 5 per interval: stays off.
  for (int i = 0; i < 9; ++i) EXPECT_TRUE(cmf.Check(Read(100 + i, 0, 100 * i), false));
  EXPECT_TRUE(cmf.Check(Read(200, 0, 1000), false));
  EXPECT_TRUE(cmf.IsOff(0));
  // Second interval [1000, 2000): 3 accesses (the one at 1000 plus two) -> 3 < 5 -> back on.
  EXPECT_TRUE(cmf.Check(Read(201, 0, 1500), false));
  EXPECT_TRUE(cmf.Check(Read(202, 0, 1900), false));
  EXPECT_FALSE(cmf.Check(Read(203, 0, 2000), false));
  EXPECT_FALSE(cmf.IsOff(0));
  EXPECT_EQ(cmf.turned_on(), 1u);
}

TEST(CmfBypassTest, AQuietGapLongerThanAnIntervalReenables) {
  CmfBypass cmf(Small());
  for (int i = 0; i < 10; ++i) cmf.Check(Read(i, 0, 0), false);
  ASSERT_TRUE(cmf.IsOff(0));
  // No access for 10 intervals: a rate of 0 per interval, so the first access after the gap is
  // cached again.
  EXPECT_FALSE(cmf.Check(Read(1, 0, 10000), false));
  EXPECT_FALSE(cmf.IsOff(0));
}

TEST(CmfDriverTest, SequentialWritesLargerThanTheCacheGoAround) {
  DriverParts parts;
  parts.make_space = [](SlotTable* t) {
    return std::make_unique<GlobalSpace>(
        100, t, [](SlotTable* s, size_t) { return std::make_unique<LruOrder>(s); });
  };
  CmfConfig cfg = Small();
  parts.bypasses.push_back(std::make_unique<CmfBypass>(cfg));
  auto cache = *CacheDriver::Create(DriverConfig{"lru+cmf", 100}, std::move(parts));
  const testing::Tally t = [&] {
    std::vector<Access> trace;
    for (uint64_t b = 0; b < 160; ++b) trace.push_back(Write(b));
    return testing::Replay(*cache, trace);
  }();
  // The first window (10 writes, all misses) is cached, then everything goes around.
  EXPECT_EQ(t.admitted, 9u);
  EXPECT_EQ(t.bypassed, 151u);
  EXPECT_EQ(t.evicted, 0u);
  EXPECT_EQ(cache->dirty_count(), 9u);
}

}  // namespace
}  // namespace ringcache::policy
