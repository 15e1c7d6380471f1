#include "datanode/hdd_emulator.h"

#include "gtest/gtest.h"

namespace ringcache::datanode {
namespace {

TEST(HddEmulatorTest, RequestsQueueLikeOneSpindle) {
  SimulatedClock clock(1000);
  HddConfig cfg{true, 5.0, 100.0};
  HddEmulator hdd(cfg, &clock);
  // 5 ms seek + 1 MiB at 100 MiB/s = 10 ms transfer.
  EXPECT_EQ(hdd.Reserve(1 << 20), 1000 + 15000);
  // The second request waits for the first.
  EXPECT_EQ(hdd.Reserve(0), 1000 + 15000 + 5000);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(hdd.Reserve(0), 1000 + 1000000 + 5000);
}

TEST(HddEmulatorTest, ConsecutiveLogAppendsDoNotSeek) {
  SimulatedClock clock(0);
  HddEmulator hdd(HddConfig{true, 5.0, 100.0}, &clock);
  EXPECT_EQ(hdd.Reserve(0, true), 5000);          // head moves to the log
  EXPECT_EQ(hdd.Reserve(0, true), 5000);          // already there
  EXPECT_EQ(hdd.Reserve(0, false), 10000);        // a block write seeks away
  EXPECT_EQ(hdd.Reserve(0, true), 15000);         // and back
}

TEST(HddEmulatorTest, DisabledNeverSleeps) {
  SimulatedClock clock;
  HddEmulator hdd(HddConfig{}, &clock);
  hdd.Charge(1 << 30);  // would block forever on a simulated clock if it slept
  SUCCEED();
}

TEST(HddEmulatorTest, Validate) {
  EXPECT_FALSE((HddConfig{true, -1, 100}).Validate().ok());
  EXPECT_FALSE((HddConfig{true, 5, 0}).Validate().ok());
  EXPECT_TRUE((HddConfig{true, 5, 100}).Validate().ok());
}

}  // namespace
}  // namespace ringcache::datanode
