// Tests of SieveAdmission (sieve.h, paper 002 §III-C).
#include "cachenode/policy/sieve.h"

#include "cachenode/policy/driver.h"
#include "cachenode/policy/lru.h"
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

}  // namespace
}  // namespace ringcache::policy
