// The destage planner's rules, fed numbers: no threads, no clock, no I/O.
#include "cachenode/destage_planner.h"

#include <gtest/gtest.h>

namespace ringcache::cachenode {
namespace {

DestagePlannerOptions Options() {
  DestagePlannerOptions o;
  o.idle_ops_per_s = 100;
  o.idle_window_ms = 500;
  o.dirty_high_watermark = 0.6;
  o.dirty_low_watermark = 0.4;
  o.forced_destage_mb_s = 1;
  o.forced_destage_duty = 0.25;
  o.slots = 1000;
  return o;
}

constexpr int64_t kMs = 1000;

TEST(DestagePlannerTest, IdleOnlyAfterAQuietWindow) {
  DestagePlanner p(Options(), 0, 0);
  uint64_t ops = 0;
  int64_t now = 0;
  // Busy: 50 ops every 50 ms = 1000 ops/s.
  for (int i = 0; i < 20; ++i) {
    now += 50 * kMs;
    ops += 50;
    EXPECT_FALSE(p.Tick(now, ops, 10, false).idle) << i;
  }
  // Quiet (1 op per 50 ms = 20 ops/s < 100): idle once 500 ms have passed since the last busy
  // tick, not before.
  const int64_t quiet_from = now;
  bool became_idle = false;
  for (int i = 0; i < 20; ++i) {
    now += 50 * kMs;
    ops += 1;
    const auto d = p.Tick(now, ops, 10, false);
    EXPECT_EQ(d.idle, now - quiet_from >= 500 * kMs) << i;
    became_idle |= d.idle;
    EXPECT_EQ(d.destage(), d.idle);  // 10 dirty of 1000: not forcing
  }
  EXPECT_TRUE(became_idle);
  // One busy tick ends idleness at once.
  now += 50 * kMs;
  ops += 100;
  EXPECT_FALSE(p.Tick(now, ops, 10, false).idle);
}

TEST(DestagePlannerTest, ForcedBetweenTheWatermarksWithHysteresis) {
  DestagePlanner p(Options(), 0, 0);
  uint64_t ops = 0;
  int64_t now = 0;
  auto tick = [&](uint64_t dirty) {
    now += 50 * kMs;
    ops += 100;  // always busy: only forcing can destage
    return p.Tick(now, ops, dirty, false);
  };
  EXPECT_FALSE(tick(500).forcing);  // between the marks, never started
  EXPECT_FALSE(tick(600).forcing);  // at the high mark: not above it
  EXPECT_TRUE(tick(601).forcing);
  EXPECT_TRUE(tick(450).forcing);   // still above the low mark
  EXPECT_TRUE(tick(400).forcing);   // at the low mark: not below it
  EXPECT_FALSE(tick(399).forcing);
  EXPECT_FALSE(tick(450).forcing);  // back between the marks: stays off
}

TEST(DestagePlannerTest, LogPushbackForcesWhileThereIsDirtyData) {
  DestagePlanner p(Options(), 0, 0);
  EXPECT_FALSE(p.Tick(50 * kMs, 100, 0, true).forcing) << "nothing to destage";
  EXPECT_TRUE(p.Tick(100 * kMs, 200, 5, true).forcing);
  // Pushback ended, but forcing holds until below the low watermark (as above the high one).
  EXPECT_FALSE(p.Tick(150 * kMs, 300, 5, false).forcing) << "5 < low watermark: off";
}

TEST(DestagePlannerTest, PacingHoldsTheByteRateAndTheDutyCycle) {
  DestagePlanner p(Options(), 0, 0);  // 1 MiB/s, duty 25%
  // 1 MiB written in 100 ms: the byte rate asks for the rest of the second.
  EXPECT_EQ(p.PauseMicros(1 << 20, 100 * kMs, 10 * kMs), 900 * kMs);
  // 4 KiB in 100 ms is well under the rate; the duty cycle asks for 3x the last write.
  EXPECT_EQ(p.PauseMicros(4096, 100 * kMs, 10 * kMs), 30 * kMs);
}

TEST(DestagePlannerTest, AgingStartsAtHalfTheTargetWhateverTheLoad) {
  DestagePlannerOptions o = Options();
  o.dirty_age_target_ms = 30000;
  DestagePlanner p(o, 0, 0);
  uint64_t ops = 0;
  int64_t now = 0;
  auto tick = [&](uint64_t dirty, int64_t age_ms) {
    now += 50 * kMs;
    ops += 100;  // always busy: never idle
    return p.Tick(now, ops, dirty, false, age_ms * kMs);
  };
  EXPECT_FALSE(tick(10, 14999).destage());
  EXPECT_TRUE(tick(10, 15000).aging);
  EXPECT_TRUE(tick(10, 15000).destage());
  EXPECT_FALSE(tick(0, 20000).aging) << "nothing dirty";
  EXPECT_FALSE(tick(10, 14000).aging) << "back under half the target";
  o.dirty_age_target_ms = 0;
  DestagePlanner off(o, 0, 0);
  EXPECT_FALSE(off.Tick(50 * kMs, 100, 10, false, 3600000 * kMs).aging) << "0: no aging";
}

TEST(DestagePlannerTest, DestageSpeedsUpWithDirtAndAgeAndIsUnpacedAtTheCap) {
  DestagePlannerOptions o = Options();  // 1000 slots, low 0.4, high 0.6
  o.dirty_age_target_ms = 30000;
  o.dirty_cap = 0.9;
  DestagePlanner p(o, 0, 0);
  int64_t now = 0;
  auto speed = [&](uint64_t dirty, int64_t age_ms) {
    now += 50 * kMs;
    return p.Tick(now, 0, dirty, false, age_ms * kMs).speed;
  };
  EXPECT_DOUBLE_EQ(speed(100, 0), 1);
  EXPECT_DOUBLE_EQ(speed(400, 0), 1);    // at the low watermark
  EXPECT_DOUBLE_EQ(speed(500, 0), 2.5);  // halfway to the high one
  EXPECT_DOUBLE_EQ(speed(600, 0), 4);    // at the high one
  EXPECT_DOUBLE_EQ(speed(800, 0), 4);
  EXPECT_DOUBLE_EQ(speed(10, 30000), 1);   // at the age target
  EXPECT_DOUBLE_EQ(speed(10, 45000), 2);   // 1.5x the target
  EXPECT_DOUBLE_EQ(speed(10, 600000), 4);  // capped
  EXPECT_DOUBLE_EQ(speed(900, 0), 0) << "at the cap: not paced";
  // The pace follows the speed: 4x the byte rate, the duty cycle 4 x 25% = 100%.
  EXPECT_EQ(p.PauseMicros(1 << 20, 100 * kMs, 10 * kMs, 4), 150 * kMs);
  EXPECT_EQ(p.PauseMicros(4096, 100 * kMs, 10 * kMs, 4), 0);
  EXPECT_EQ(p.PauseMicros(1 << 20, 0, 10 * kMs, 0), 0);
}

TEST(DestagePlannerTest, WritersSlowDownSmoothlyUpToTheCap) {
  DestagePlannerOptions o = Options();  // 1000 slots, high 0.6
  o.dirty_cap = 0.9;
  o.max_write_delay_us = 10000;
  DestagePlanner p(o, 0, 0);
  EXPECT_EQ(p.WriteDelayMicros(0), 0);
  EXPECT_EQ(p.WriteDelayMicros(600), 0);  // at the high watermark
  int64_t last = 0;
  for (uint64_t dirty = 610; dirty < 900; dirty += 10) {
    const int64_t d = p.WriteDelayMicros(dirty);
    EXPECT_GE(d, last) << dirty;  // never less for more dirt
    EXPECT_LE(d - last, 1000) << dirty << ": no step of more than 1 ms per 1% of dirt";
    last = d;
  }
  EXPECT_EQ(p.WriteDelayMicros(750), 2500);  // halfway: a quarter of the most
  EXPECT_GT(last, 9000);
  EXPECT_FALSE(p.AtCap(899));
  EXPECT_TRUE(p.AtCap(900));
  EXPECT_EQ(p.WriteDelayMicros(900), -1) << "at the cap: wait for destage";
}

TEST(DestagePlannerTest, PerVdiCapOnlyWhenSet) {
  DestagePlannerOptions o = Options();  // 1000 slots
  DestagePlanner none(o, 0, 0);
  EXPECT_FALSE(none.VdiAtCap(1000)) << "0: no per-VDI cap";
  o.vdi_dirty_cap = 0.25;
  DestagePlanner p(o, 0, 0);
  EXPECT_FALSE(p.VdiAtCap(249));
  EXPECT_TRUE(p.VdiAtCap(250));
}

TEST(DestagePlannerTest, ColdestVdiFirstTiesToTheLowestId) {
  EXPECT_FALSE(DestagePlanner::ColdestVdi({}).has_value());
  EXPECT_EQ(DestagePlanner::ColdestVdi({{7, 50}, {3, 10}, {9, 10}}), 3u);
  EXPECT_EQ(DestagePlanner::ColdestVdi({{9, 0}, {2, 1}}), 9u);
  EXPECT_EQ(DestagePlanner::ColdestVdi({{5, 4}, {4, 4}}), 4u);
}

}  // namespace
}  // namespace ringcache::cachenode
