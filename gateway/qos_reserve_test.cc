// I/O reservations (gateway/qos_reserve.h) on an injected clock: the rule alone (a VDI below
// its reservation and slowed by the others cuts the background's rate by a factor per window
// down to a floor; one that asks for less, or is at its reservation, holds nothing back; the
// rate holds while it is a little slow, rises once it is fast, and goes when far above the
// background's use; a probe at half the background's rate learns the best time of a VDI that
// never showed it), then the
// gateway's limiters: requests within a reservation skip the background's bucket, the others
// wait in it, and the asynchronous path takes only what is there.
#include "gateway/qos_reserve.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "gateway/qos.h"

namespace ringcache::gateway {
namespace {

const absl::Duration kW = kReserveWindow;
using Control = ReservationControl;

// One window of a VDI reserving `reserve` requests/s: `ops` requests of 4 KiB, each `each` at
// the gateway.
Control::Sample Window(double reserve, uint64_t ops, absl::Duration each) {
  Control::Sample s;
  s.key = 1;
  s.reserve_iops = reserve;
  s.ops = s.done = ops;
  s.bytes = ops * 4096;
  s.latency = each * static_cast<int64_t>(ops);
  return s;
}
const absl::Duration kFastReq = absl::Microseconds(100);
const absl::Duration kSlowReq = absl::Microseconds(300);  // 3x: over kSlow (1.5x)

TEST(ReservationControlTest, ASlowedVdiBelowItsReservationCutsTheBackgroundDownToTheFloor) {
  Control c;
  // 1,000 reserved, 100 in a quarter second (400/s): below, but as fast as it has been.
  EXPECT_EQ(c.Step({Window(1000, 100, kFastReq)}, 250, kW), 0);
  // Three times slower while the background made 250 requests (1,000/s): cut to 0.7x.
  EXPECT_DOUBLE_EQ(c.Step({Window(1000, 100, kSlowReq)}, 250, kW), 700);
  EXPECT_EQ(c.shorts(), 1);
  EXPECT_TRUE(c.short_samples()[0]);
  // The background made less than its rate: the cut starts from what it made.
  EXPECT_DOUBLE_EQ(c.Step({Window(1000, 100, kSlowReq)}, 100, kW), 280);
  EXPECT_DOUBLE_EQ(c.Step({Window(1000, 100, kSlowReq)}, 500, kW), 196);  // from the rate
  for (int i = 0; i < 20; ++i) c.Step({Window(1000, 100, kSlowReq)}, 500, kW);
  EXPECT_DOUBLE_EQ(c.rate(), kMinBackgroundIops) << "the background never stops";
}

TEST(ReservationControlTest, AVdiThatAsksForLessOrHasItsReservationHoldsNothingBack) {
  Control c;
  EXPECT_EQ(c.Step({Window(1000, 100, kFastReq)}, 1000, kW), 0);
  // Slow, but at its reservation (250 in a quarter second is 1,000/s).
  EXPECT_EQ(c.Step({Window(1000, 250, kSlowReq)}, 1000, kW), 0);
  // Slow, but nearly idle: 5 requests tell nothing.
  EXPECT_EQ(c.Step({Window(1000, 5, absl::Milliseconds(10))}, 1000, kW), 0);
  // No reservation at all.
  EXPECT_EQ(c.Step({Window(0, 100, kSlowReq)}, 1000, kW), 0);
  EXPECT_EQ(c.shorts(), 0);
}

TEST(ReservationControlTest, TheRateHoldsWhileALittleSlowRisesOnceFastAndGoesWhenUnused) {
  Control c;
  c.Step({Window(1000, 100, kFastReq)}, 250, kW);
  c.Step({Window(1000, 100, kSlowReq)}, 250, kW);  // 700
  // 1.3x its best: not slow enough to cut, too slow to rise.
  EXPECT_DOUBLE_EQ(c.Step({Window(1000, 100, absl::Microseconds(130))}, 175, kW), 700);
  // Fast again: up by a tenth plus 20 per window.
  EXPECT_DOUBLE_EQ(c.Step({Window(1000, 100, kFastReq)}, 175, kW), 790);
  EXPECT_DOUBLE_EQ(c.Step({Window(1000, 100, kFastReq)}, 197, kW), 889);
  // The background now makes 100/s: a rate over twice that (plus 40) holds nothing: removed.
  EXPECT_EQ(c.Step({Window(1000, 100, kFastReq)}, 25, kW), 0);
}

TEST(ReservationControlTest, AProbeLearnsTheBestTimeOfAVdiSlowedFromTheStart) {
  Control c;
  // Slow from its first window on: its best is its slow time, nothing looks short.
  for (int i = 1; i < Control::kProbeAfter; ++i) {
    EXPECT_EQ(c.Step({Window(1000, 100, kSlowReq)}, 1000, kW), 0) << i;
  }
  // Below its reservation for kProbeAfter windows with no hold: the probe holds the background
  // to half what it made (1,000 in the window: 4,000/s) for kProbeWindows windows.
  EXPECT_EQ(c.Step({Window(1000, 100, kSlowReq)}, 1000, kW), 2000);
  EXPECT_TRUE(c.probing());
  EXPECT_EQ(c.Step({Window(1000, 200, kFastReq)}, 500, kW), 2000);
  EXPECT_EQ(c.Step({Window(1000, 200, kFastReq)}, 500, kW), 0);  // the probe ends
  EXPECT_FALSE(c.probing());
  // Now it knows: slow again beside the background is short.
  EXPECT_DOUBLE_EQ(c.Step({Window(1000, 100, kSlowReq)}, 250, kW), 700);
}

TEST(ReservationControlTest, ABytesReservationIsKeptTheSameWay) {
  Control c;
  // 100 MiB/s reserved, no requests reserved: 100 requests of 4 KiB a window is 1.6 MiB/s.
  auto bytes_only = [](uint64_t ops, absl::Duration each) {
    Control::Sample s = Window(0, ops, each);
    s.reserve_bytes_per_s = 100 << 20;
    return s;
  };
  EXPECT_EQ(c.Step({bytes_only(100, kFastReq)}, 250, kW), 0);
  EXPECT_DOUBLE_EQ(c.Step({bytes_only(100, kSlowReq)}, 250, kW), 700);
  // At its bytes reservation (25 MiB in a quarter second), however slow: not short, and the
  // rate rises.
  Control::Sample big = bytes_only(100, kSlowReq);
  big.bytes = 25 << 20;
  EXPECT_DOUBLE_EQ(c.Step({big}, 175, kW), 790);
  EXPECT_EQ(c.shorts(), 0);
}

TEST(ReservationControlTest, AnotherGatewaysShortVdiCutsOncePerReportAndHoldsTheRate) {
  Control c;
  Control::Remote remote;
  remote.short_now = remote.cut = true;
  EXPECT_DOUBLE_EQ(c.Step({}, 250, kW, remote), 700);  // a report: cut once
  remote.cut = false;
  EXPECT_DOUBLE_EQ(c.Step({}, 175, kW, remote), 700);  // still short there: held, not raised
  EXPECT_DOUBLE_EQ(c.Step({}, 175, kW), 790);          // gone: raised
}

// Two VDIs on one gateway's registry: "gold" reserves 100 IOPS, "bulk" has no limit.
struct Gateway {
  SimulatedClock clock{absl::ToUnixMicros(absl::FromUnixSeconds(1000))};
  std::map<std::string, v1::VdiQos> qos;
  QosRegistry registry{&clock, [this](const std::string& vdi) -> absl::StatusOr<v1::VdiQos> {
                         return qos[vdi];
                       }};
  std::shared_ptr<VdiLimiter> gold, bulk;

  Gateway() {
    qos["gold"].set_reserve_iops(1000);
    gold = registry.For("gold");
    bulk = registry.For("bulk");
    EXPECT_DOUBLE_EQ(gold->reserve(), 1000);
    EXPECT_TRUE(registry.reservations()->armed());
  }
  // `n` requests of a limiter at this instant; returns the longest wait.
  absl::Duration Requests(VdiLimiter* l, int n) {
    absl::Duration most;
    for (int i = 0; i < n; ++i) most = std::max(most, l->Admit(false, 4096));
    return most;
  }
  // The tick of the window that ended now (a request would run it; tests run it themselves).
  void Tick() { registry.reservations()->MaybeTick(); }
  // One window after its tick: gold's requests one after another, each `each` at the
  // gateway, then bulk's, then the rest of the window.
  void Window(int gold_ops, absl::Duration each, int bulk_ops) {
    Tick();
    for (int i = 0; i < gold_ops; ++i) {
      const absl::Time started = gold->Start();
      EXPECT_NE(started, absl::InfinitePast());
      gold->Admit(false, 4096);
      clock.Advance(each);
      gold->Finish(started);
    }
    Requests(bulk.get(), bulk_ops);
    clock.Advance(kW - each * gold_ops);
  }
  // Gold below its reservation (80/s of 1,000), fast, then slowed beside 1,000/s of bulk:
  // the tick after that holds bulk back.
  void SlowGold() {
    Window(20, kFastReq, 250);
    Window(20, kSlowReq, 250);
    Tick();
  }
};

TEST(ReservationsTest, AShortReservedVdiHoldsTheOthersBackButNotItself) {
  Gateway g;
  Reservations* r = g.registry.reservations();
  g.SlowGold();
  EXPECT_DOUBLE_EQ(r->background_rate(), 700);
  EXPECT_TRUE(r->limiting());
  // The background's bucket holds a quarter second of its rate (175): more waits.
  EXPECT_EQ(g.Requests(g.bulk.get(), 170), absl::ZeroDuration());
  EXPECT_GT(g.Requests(g.bulk.get(), 100), absl::Milliseconds(100));
  // The asynchronous path takes a background request only when its token is there.
  bool background = false;
  EXPECT_FALSE(g.bulk->TryAdmitNow(false, 4096, &background));
  EXPECT_TRUE(g.gold->TryAdmitNow(false, 4096, &background));
  EXPECT_FALSE(background);
  g.gold->Refund(false, 4096, background);
  // The reserved VDI's requests within its reservation do not wait behind that debt (its
  // bucket holds a tenth of a second: 100), nor do those beyond it: they wait for the
  // reservation's next token, not behind the background's debt.
  EXPECT_EQ(g.Requests(g.gold.get(), 100), absl::ZeroDuration());
  EXPECT_LE(g.Requests(g.gold.get(), 5), absl::Milliseconds(5));
  EXPECT_FALSE(g.gold->TryAdmitNow(false, 4096, &background)) << "a worker waits for it";
}

TEST(ReservationsTest, ABytesReservationAloneHoldsTheOthersBackAndSkipsTheirBucket) {
  Gateway g;
  g.qos["gold"].clear_reserve_iops();
  g.qos["gold"].set_reserve_bytes_per_s(4 << 20);  // 1,024 requests of 4 KiB a second
  g.clock.Advance(absl::Seconds(1));  // read again
  ASSERT_EQ(g.gold->reserve(), 0);
  ASSERT_DOUBLE_EQ(g.gold->reserve_bytes(), 4 << 20);
  Reservations* r = g.registry.reservations();
  g.SlowGold();  // 80 KiB/s of 4 MiB/s, three times slower
  EXPECT_TRUE(r->limiting());
  EXPECT_GT(g.Requests(g.bulk.get(), 400), absl::Milliseconds(100));
  // A tenth of a second of its bytes (409.6 KiB: 102 requests of 4 KiB) goes at once.
  EXPECT_EQ(g.Requests(g.gold.get(), 100), absl::ZeroDuration());
}

TEST(ReservationsTest, OnceTheReservationIsMetTheHoldEnds) {
  Gateway g;
  Reservations* r = g.registry.reservations();
  g.SlowGold();
  ASSERT_TRUE(r->limiting());
  // Gold is fast again and the background makes 40/s: the rate climbs past twice the
  // background's use and the bucket goes.
  for (int i = 0; i < 3 && r->limiting(); ++i) g.Window(20, kFastReq, 10);
  g.Tick();
  EXPECT_FALSE(r->limiting());
  EXPECT_EQ(g.Requests(g.bulk.get(), 1000), absl::ZeroDuration());
}

TEST(ReservationsTest, ARemovedReservationHoldsNothingBackAnyMore) {
  Gateway g;
  Reservations* r = g.registry.reservations();
  g.SlowGold();
  ASSERT_TRUE(r->limiting());
  // The reservation goes: within a second (the limits' refresh) nothing is held back.
  g.qos["gold"].clear_reserve_iops();
  g.clock.Advance(absl::Seconds(1));
  EXPECT_EQ(g.gold->reserve(), 0);
  EXPECT_FALSE(r->armed());
  EXPECT_EQ(g.gold->Start(), absl::InfinitePast());
  EXPECT_EQ(g.Requests(g.bulk.get(), 1000), absl::ZeroDuration());
}

TEST(ReservationsTest, CountsThatDoNotCoverOneWindowSteerNothing) {
  Gateway g;
  Reservations* r = g.registry.reservations();
  g.Window(20, kFastReq, 250);
  g.Window(20, kSlowReq, 250);
  g.clock.Advance(absl::Seconds(5));  // no request for a while: the next tick starts afresh
  g.Tick();
  EXPECT_FALSE(r->limiting());
  EXPECT_EQ(r->background_rate(), 0);
}

}  // namespace
}  // namespace ringcache::gateway
