// I/O reservations (gateway/qos_reserve.h) on an injected clock: the rule alone (a short,
// busy VDI cuts the background's rate by a factor per window down to a floor; an idle one holds
// nothing back; the rate rises once every reservation is met and goes when far above the
// background's use), then the gateway's limiters: requests within a reservation skip the
// background's bucket, the others wait in it, and the asynchronous path takes only what is there.
#include "gateway/qos_reserve.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "gateway/qos.h"

namespace ringcache::gateway {
namespace {

const absl::Duration kW = kReserveWindow;

ReservationControl::Sample Busy(double reserve, uint64_t ops) {
  return {reserve, ops, kW};
}

TEST(ReservationControlTest, ABusyVdiBelowItsReservationCutsTheBackgroundDownToTheFloor) {
  ReservationControl c;
  // 100 reserved, 10 in a quarter second (40/s) while busy the whole window; the background
  // made 250 requests (1,000/s).
  EXPECT_DOUBLE_EQ(c.Step({Busy(100, 10)}, 250, kW), 700);
  EXPECT_EQ(c.shorts(), 1);
  // Next window the background made less than its rate: the cut starts from what it made.
  EXPECT_DOUBLE_EQ(c.Step({Busy(100, 10)}, 100, kW), 280);
  EXPECT_DOUBLE_EQ(c.Step({Busy(100, 10)}, 500, kW), 196);  // from the rate, not the 2,000/s
  for (int i = 0; i < 20; ++i) c.Step({Busy(100, 10)}, 500, kW);
  EXPECT_DOUBLE_EQ(c.rate(), kMinBackgroundIops) << "the background never stops";
}

TEST(ReservationControlTest, AnIdleOrSatisfiedReservedVdiHoldsNothingBack) {
  ReservationControl c;
  // Busy a tenth of the window: it had what it asked for, however few its requests.
  EXPECT_EQ(c.Step({{100, 1, kW / 10}}, 1000, kW), 0);
  // Busy and at its reservation (25 in a quarter second is 100/s).
  EXPECT_EQ(c.Step({Busy(100, 25)}, 1000, kW), 0);
  // No reservation at all.
  EXPECT_EQ(c.Step({Busy(0, 0)}, 1000, kW), 0);
  EXPECT_EQ(c.shorts(), 0);
}

TEST(ReservationControlTest, TheRateHoldsNearTheReservationRisesOnceMetAndGoesWhenUnused) {
  ReservationControl c;
  c.Step({Busy(100, 10)}, 250, kW);  // 700
  // 96/s: within 5% of the reservation, not met: the rate holds.
  EXPECT_DOUBLE_EQ(c.Step({Busy(100, 24)}, 175, kW), 700);
  // Met: up by a tenth plus 20 per window.
  EXPECT_DOUBLE_EQ(c.Step({Busy(100, 25)}, 175, kW), 790);
  EXPECT_DOUBLE_EQ(c.Step({Busy(100, 25)}, 197, kW), 889);
  // The background now makes 100/s: a rate over twice that (plus 40) holds nothing: removed.
  EXPECT_EQ(c.Step({Busy(100, 25)}, 25, kW), 0);
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
    qos["gold"].set_reserve_iops(100);
    gold = registry.For("gold");
    bulk = registry.For("bulk");
    EXPECT_DOUBLE_EQ(gold->reserve(), 100);
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
  // One window after its tick: gold busy throughout making `gold_ops`, bulk making `bulk_ops`.
  void Window(int gold_ops, int bulk_ops) {
    Tick();
    EXPECT_TRUE(gold->Start());
    Requests(gold.get(), gold_ops);
    Requests(bulk.get(), bulk_ops);
    clock.Advance(kW);
    gold->Finish();
  }
};

TEST(ReservationsTest, AShortReservedVdiHoldsTheOthersBackButNotItself) {
  Gateway g;
  Reservations* r = g.registry.reservations();
  g.Window(5, 250);  // 20/s of 100 while busy: short (the first tick only starts the counts)
  g.Tick();
  EXPECT_DOUBLE_EQ(r->background_rate(), 700);
  EXPECT_TRUE(r->limiting());
  // The background's bucket holds a quarter second of its rate (175): more waits.
  EXPECT_EQ(g.Requests(g.bulk.get(), 170), absl::ZeroDuration());
  EXPECT_GT(g.Requests(g.bulk.get(), 100), absl::Milliseconds(100));
  // The reserved VDI's requests within its reservation do not wait behind that debt.
  EXPECT_EQ(g.Requests(g.gold.get(), 5), absl::ZeroDuration());
  // The asynchronous path takes a background request only when its token is there.
  bool background = false;
  EXPECT_FALSE(g.bulk->TryAdmitNow(false, 4096, &background));
  EXPECT_TRUE(g.gold->TryAdmitNow(false, 4096, &background));
  EXPECT_FALSE(background);
  g.gold->Refund(false, 4096, background);
}

TEST(ReservationsTest, OnceTheReservationIsMetTheHoldEnds) {
  Gateway g;
  Reservations* r = g.registry.reservations();
  g.Window(5, 250);
  g.Tick();
  ASSERT_TRUE(r->limiting());
  // Gold gets its 100/s (25 a window) and the background makes 40/s: the rate climbs past
  // twice the background's use and the bucket goes.
  for (int i = 0; i < 3 && r->limiting(); ++i) g.Window(25, 10);
  g.Tick();
  EXPECT_FALSE(r->limiting());
  EXPECT_EQ(g.Requests(g.bulk.get(), 1000), absl::ZeroDuration());
}

TEST(ReservationsTest, ARemovedReservationHoldsNothingBackAnyMore) {
  Gateway g;
  Reservations* r = g.registry.reservations();
  g.Window(5, 250);
  g.Tick();
  ASSERT_TRUE(r->limiting());
  // The reservation goes: within a second (the limits' refresh) nothing is held back.
  g.qos["gold"].clear_reserve_iops();
  g.clock.Advance(absl::Seconds(1));
  EXPECT_EQ(g.gold->reserve(), 0);
  EXPECT_FALSE(r->armed());
  EXPECT_FALSE(g.gold->Start());
  EXPECT_EQ(g.Requests(g.bulk.get(), 1000), absl::ZeroDuration());
}

TEST(ReservationsTest, CountsThatDoNotCoverOneWindowSteerNothing) {
  Gateway g;
  Reservations* r = g.registry.reservations();
  g.Window(5, 250);
  g.clock.Advance(absl::Seconds(5));  // no request for a while: the next tick starts afresh
  g.Tick();
  EXPECT_FALSE(r->limiting());
  EXPECT_EQ(r->background_rate(), 0);
}

}  // namespace
}  // namespace ringcache::gateway
