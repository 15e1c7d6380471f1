// Tests of cache-size parsing.
#include "tools/sim/sizes.h"

#include "gtest/gtest.h"

namespace ringcache::sim {
namespace {

TEST(SimSizes, ParsesBlocksBytesAndPercentages) {
  EXPECT_EQ(*ParseCacheSize("1000", 4096, 0), 1000u);
  EXPECT_EQ(*ParseCacheSize("1GiB", 4096, 0), 262144u);
  EXPECT_EQ(*ParseCacheSize("1G", 4096, 0), 262144u);
  EXPECT_EQ(*ParseCacheSize("4MB", 4096, 0), 976u);  // 4,000,000 / 4096
  EXPECT_EQ(*ParseCacheSize("64KiB", 8192, 0), 8u);
  EXPECT_EQ(*ParseCacheSize("10%", 4096, 12345), 1235u);
  EXPECT_EQ(*ParseCacheSize("0.5%", 4096, 1000), 5u);
  EXPECT_EQ(*ParseCacheSize(" 2 ", 4096, 0), 2u);
  EXPECT_TRUE(SizeIsRelative("10%"));
  EXPECT_FALSE(SizeIsRelative("10GiB"));
}

TEST(SimSizes, RejectsBadSizes) {
  EXPECT_FALSE(ParseCacheSize("", 4096, 0).ok());
  EXPECT_FALSE(ParseCacheSize("0", 4096, 0).ok());
  EXPECT_FALSE(ParseCacheSize("1KiB", 4096, 0).ok());  // rounds to 0 blocks
  EXPECT_FALSE(ParseCacheSize("12XB", 4096, 0).ok());
  EXPECT_FALSE(ParseCacheSize("abc", 4096, 0).ok());
  EXPECT_FALSE(ParseCacheSize("-5%", 4096, 100).ok());
  EXPECT_FALSE(ParseCacheSize("1%", 4096, 10).ok());  // 0.1 block
}

}  // namespace
}  // namespace ringcache::sim
