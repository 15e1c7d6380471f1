// The per-VDI limits (gateway/qos.h) on an injected clock: the buckets' burst and rate, debt,
// reads, writes and both limited apart, the share of a cluster-wide limit, limits changed live,
// and the device that waits for them.
#include "gateway/qos.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace ringcache::gateway {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(TokenBucketTest, TheBurstGoesAtOnceThenTheRate) {
  TokenBucket b;
  b.Set(100, 10, kT0);  // 100 per second, 10 at once
  for (int i = 0; i < 10; ++i) EXPECT_EQ(b.Take(1, kT0), absl::ZeroDuration()) << i;
  EXPECT_EQ(b.Take(1, kT0), absl::Milliseconds(10));
  EXPECT_EQ(b.Take(1, kT0), absl::Milliseconds(20));  // behind the one before it
  // A second later the bucket is full again: 10 tokens, not the 100 of the second.
  const absl::Time t1 = kT0 + absl::Seconds(1);
  EXPECT_TRUE(b.Has(10, t1));
  EXPECT_FALSE(b.Has(10.5, t1));
}

TEST(TokenBucketTest, ARequestLargerThanTheBurstWaitsForItsWholeCostAndTheNextBehindIt) {
  TokenBucket b;
  b.Set(100, 10, kT0);
  EXPECT_EQ(b.Take(50, kT0), absl::Milliseconds(400));  // 40 in debt at 100/s
  EXPECT_EQ(b.Take(1, kT0 + absl::Milliseconds(100)), absl::Milliseconds(310));
  b.Give(1000);  // given back: never beyond the burst
  EXPECT_TRUE(b.Has(10, kT0 + absl::Milliseconds(100)));
  EXPECT_FALSE(b.Has(11, kT0 + absl::Milliseconds(100)));
}

TEST(TokenBucketTest, UnlimitedNeverWaitsAndANewLimitStartsFull) {
  TokenBucket b;
  EXPECT_TRUE(b.unlimited());
  EXPECT_EQ(b.Take(1e12, kT0), absl::ZeroDuration());
  b.Set(10, 5, kT0);
  EXPECT_TRUE(b.Has(5, kT0));
  b.Set(0, 0, kT0);
  EXPECT_EQ(b.Take(1e12, kT0), absl::ZeroDuration());
}

struct LimiterFixture {
  SimulatedClock clock{absl::ToUnixMicros(kT0)};
  v1::VdiQos qos;
  int lookups = 0;
  VdiLimiter limiter{"vm", &clock,
                     [this]() -> absl::StatusOr<v1::VdiQos> {
                       ++lookups;
                       return qos;
                     },
                     nullptr};
};

// Requests one after another, each waiting as told (the clock moved by the wait): how many went
// in `seconds` of the clock.
int Sustained(LimiterFixture* f, bool write, uint64_t bytes, double seconds) {
  const absl::Time end = f->clock.Now() + absl::Seconds(seconds);
  int n = 0;
  for (;;) {
    const absl::Duration wait = f->limiter.Admit(write, bytes);
    f->clock.Advance(wait);
    if (f->clock.Now() > end) return n;
    ++n;
  }
}

TEST(VdiLimiterTest, ASustainedLoadGetsTheRatePlusTheBurst) {
  LimiterFixture f;
  f.qos.set_write_iops(1000);
  f.qos.set_burst_ms(200);
  const int n = Sustained(&f, true, 4096, 10);
  EXPECT_GE(n, 10 * 1000 + 200 - 1);
  EXPECT_LE(n, 10 * 1000 + 200 + 1);
}

TEST(VdiLimiterTest, ReadsWritesAndBothAreLimitedApart) {
  LimiterFixture f;
  f.qos.set_read_iops(100);
  f.qos.set_iops(150);  // both together; writes have no limit of their own
  for (int i = 0; i < 100; ++i) EXPECT_EQ(f.limiter.Admit(false, 4096), absl::ZeroDuration());
  EXPECT_GT(f.limiter.Admit(false, 4096), absl::ZeroDuration());  // reads: their own limit
  // 101 of the 150 shared tokens went to reads: 49 writes go at once, the next one waits.
  for (int i = 0; i < 49; ++i) EXPECT_EQ(f.limiter.Admit(true, 4096), absl::ZeroDuration()) << i;
  EXPECT_GT(f.limiter.Admit(true, 4096), absl::ZeroDuration());
}

TEST(VdiLimiterTest, BytesPerSecondCountBytesAndZeroWritesCountNone) {
  LimiterFixture f;
  f.qos.set_write_bytes_per_s(1 << 20);  // 1 MiB/s, a second of burst
  EXPECT_EQ(f.limiter.Admit(true, 1 << 20), absl::ZeroDuration());
  EXPECT_EQ(f.limiter.Admit(true, 0), absl::ZeroDuration());  // trims and zero writes
  EXPECT_EQ(f.limiter.Admit(true, 4096), absl::Seconds(4096.0 / (1 << 20)));  // at 1 MiB/s
  EXPECT_EQ(f.limiter.Admit(false, 1 << 30), absl::ZeroDuration());  // reads are free
}

TEST(VdiLimiterTest, AShareOfTheLimitIsAppliedHere) {
  LimiterFixture f;
  f.qos.set_iops(1000);
  f.limiter.limits();  // reads the limits
  f.limiter.SetShare(0.5);  // two gateways serve the VDI
  const int n = Sustained(&f, false, 4096, 10);
  EXPECT_GE(n, 5000 + 500 - 1);
  EXPECT_LE(n, 5000 + 500 + 1);
}

TEST(VdiLimiterTest, NewLimitsApplyWithinASecondAndLookupsStayRare) {
  LimiterFixture f;
  EXPECT_EQ(f.limiter.Admit(true, 4096), absl::ZeroDuration());
  EXPECT_EQ(f.lookups, 1);
  f.qos.set_write_iops(10);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(f.limiter.Admit(true, 4096), absl::ZeroDuration());
  EXPECT_EQ(f.lookups, 1);  // not read again within the second
  f.clock.Advance(absl::Seconds(1));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(f.limiter.Admit(true, 4096), absl::ZeroDuration());
  EXPECT_GT(f.limiter.Admit(true, 4096), absl::ZeroDuration());
  EXPECT_EQ(f.lookups, 2);
  f.qos.Clear();  // limits removed
  f.clock.Advance(absl::Seconds(2));
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(f.limiter.Admit(true, 4096), absl::ZeroDuration());
}

TEST(VdiLimiterTest, TryAdmitNowTakesOnlyWhatIsThereAndRefundsGiveItBack) {
  LimiterFixture f;
  f.qos.set_read_iops(2);
  bool bg = false;
  EXPECT_TRUE(f.limiter.TryAdmitNow(false, 4096, &bg));
  EXPECT_TRUE(f.limiter.TryAdmitNow(false, 4096, &bg));
  EXPECT_FALSE(f.limiter.TryAdmitNow(false, 4096, &bg));
  f.limiter.Refund(false, 4096, bg);
  EXPECT_TRUE(f.limiter.TryAdmitNow(false, 4096, &bg));
  EXPECT_TRUE(f.limiter.TryAdmitNow(true, 4096, &bg));  // writes: no limit
}

// A device that counts what reaches it, and when the last call came (on `clock`).
class CountingDevice : public BlockDevice {
 public:
  explicit CountingDevice(Clock* clock) : clock_(clock) {}
  absl::Status Read(uint64_t, uint32_t, char*) override { return Count(); }
  absl::Status Write(uint64_t, uint32_t, const char*, bool) override { return Count(); }
  absl::Status Trim(uint64_t, uint32_t) override { return Count(); }
  absl::Status WriteZeroes(uint64_t, uint32_t, bool, bool) override { return Count(); }
  absl::Status Flush() override { return Count(); }
  absl::Status Cache(uint64_t, uint32_t) override { return Count(); }
  absl::Status BlockStatus(uint64_t, uint32_t, std::vector<Extent>*) override { return Count(); }
  std::atomic<int> calls{0};
  std::atomic<int64_t> last_call_us{0};

 private:
  absl::Status Count() {
    last_call_us = clock_->NowMicros();
    ++calls;
    return absl::OkStatus();
  }
  Clock* const clock_;
};

TEST(QosDeviceTest, ARequestOverTheLimitGoesOnlyOnceItsTimeHasCome) {
  LimiterFixture f;
  f.qos.set_write_iops(100);
  f.qos.set_burst_ms(100);  // 10 at once
  auto inner = std::make_shared<CountingDevice>(&f.clock);
  QosDevice dev(inner, std::shared_ptr<VdiLimiter>(&f.limiter, [](VdiLimiter*) {}), &f.clock);
  char buf[4096] = {};
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(dev.Write(0, 4096, buf, false).ok());
  EXPECT_EQ(f.clock.Now(), kT0);  // the burst did not wait
  // The 11th waits 10 ms of the clock: it reaches the device only once the clock has moved.
  std::atomic<bool> done{false};
  std::thread writer([&] {
    EXPECT_TRUE(dev.Write(0, 4096, buf, false).ok());
    done = true;
  });
  while (!done.load()) {
    f.clock.Advance(absl::Milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  writer.join();
  EXPECT_EQ(inner->calls.load(), 11);
  EXPECT_GE(absl::FromUnixMicros(inner->last_call_us.load()), kT0 + absl::Milliseconds(10));
  // Flushes, cache hints and block status are never held.
  ASSERT_TRUE(dev.Flush().ok());
  std::vector<Extent> ext;
  ASSERT_TRUE(dev.BlockStatus(0, 4096, &ext).ok());
  EXPECT_EQ(inner->calls.load(), 13);
}

}  // namespace
}  // namespace ringcache::gateway
