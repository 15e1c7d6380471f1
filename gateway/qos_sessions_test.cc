// QosSessions against a real etcd (started by the test; skipped without etcd-server): two
// gateways with the same limited VDI open apply half of its limits each, one alone the whole;
// a gateway that closes the VDI, or stops, takes its key away. A gateway whose reserved VDI is
// short says so, and the other holds its own requests back until it no longer does.
#include "gateway/qos_sessions.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "gateway/qos_reserve.h"
#include "membership/testing/etcd_fixture.h"

namespace ringcache::gateway {
namespace {

// One gateway: its registration (the lease), its limiters, its sessions.
struct Gateway {
  std::unique_ptr<membership::NodeRegistration> registration;
  std::unique_ptr<QosRegistry> registry;
  std::unique_ptr<QosSessions> sessions;
};

class QosSessionsTest : public membership::testing::EtcdFixture {
 protected:
  void SetUp() override {
    EtcdFixture::SetUp();
    limits_.set_write_iops(1000);
  }

  Gateway Start(uint32_t id) {
    Gateway g;
    auto reg = Register(membership::testing::Node(membership::Role::kGateway, id));
    EXPECT_TRUE(reg.ok()) << reg.status();
    if (!reg.ok()) return g;
    g.registration = *std::move(reg);
    g.registry = std::make_unique<QosRegistry>(
        &clock_, [this](const std::string& vdi) -> absl::StatusOr<v1::VdiQos> {
          return vdi == "gold" ? gold_ : limits_;
        });
    g.sessions = std::make_unique<QosSessions>(client_.get(), g.registration.get(), "/rc", id,
                                               g.registry.get());
    return g;
  }
  size_t Keys() {
    auto r = client_->GetPrefix(QosSessionPrefix("/rc", "vm"));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->kvs.size() : 0;
  }

  size_t Holds() {
    auto r = client_->GetPrefix(QosHoldPrefix("/rc"));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->kvs.size() : 0;
  }

  v1::VdiQos limits_;
  v1::VdiQos gold_;  // the VDI "gold"'s
  SimulatedClock clock_;  // the limiters' (they read their limits again after a second of it)
};

TEST_F(QosSessionsTest, GatewaysWithALimitedVdiOpenShareItsLimits) {
  Gateway a = Start(1), b = Start(2);
  ASSERT_NE(a.sessions, nullptr);
  ASSERT_NE(b.sessions, nullptr);
  std::shared_ptr<VdiLimiter> la = a.registry->For("vm"), lb = b.registry->For("vm");
  // Not open anywhere: no key, the whole limit.
  a.sessions->Round();
  EXPECT_EQ(Keys(), 0u);
  EXPECT_EQ(la->share(), 1.0);

  la->Opened();  // a connection on gateway 1
  a.sessions->Round();
  EXPECT_EQ(Keys(), 1u);
  EXPECT_EQ(la->share(), 1.0);
  lb->Opened();  // and one on gateway 2
  b.sessions->Round();
  a.sessions->Round();
  EXPECT_EQ(Keys(), 2u);
  EXPECT_EQ(la->share(), 0.5);
  EXPECT_EQ(lb->share(), 0.5);

  lb->Closed();  // gateway 2's client goes
  b.sessions->Round();
  a.sessions->Round();
  EXPECT_EQ(Keys(), 1u);
  EXPECT_EQ(la->share(), 1.0);
  EXPECT_EQ(lb->share(), 1.0);

  // Limits removed: no key, whatever is open.
  lb->Opened();
  b.sessions->Round();
  EXPECT_EQ(Keys(), 2u);
  limits_.Clear();
  clock_.Advance(absl::Seconds(1));  // the limiters read their limits again
  a.sessions->Round();
  b.sessions->Round();
  EXPECT_EQ(Keys(), 0u);

  // A gateway that stops takes its key with it.
  limits_.set_write_iops(1000);
  clock_.Advance(absl::Seconds(1));
  a.sessions->Round();
  b.sessions->Round();
  EXPECT_EQ(Keys(), 2u);
  b.sessions.reset();
  EXPECT_EQ(Keys(), 1u);
  a.sessions->Round();
  EXPECT_EQ(la->share(), 1.0);
}

TEST_F(QosSessionsTest, AGatewayWithAShortReservedVdiHoldsTheOthersBackToo) {
  gold_.set_reserve_iops(1000);
  limits_.Clear();
  Gateway a = Start(1), b = Start(2);
  ASSERT_NE(a.sessions, nullptr);
  ASSERT_NE(b.sessions, nullptr);
  Reservations* ra = a.registry->reservations();
  Reservations* rb = b.registry->reservations();
  std::shared_ptr<VdiLimiter> gold = a.registry->For("gold");
  std::shared_ptr<VdiLimiter> bulk = b.registry->For("bulk");
  ASSERT_EQ(gold->reserve(), 1000);
  // Gold, on gateway 1, is below its reservation: fast for a window, then three times slower.
  for (absl::Duration each : {absl::Microseconds(100), absl::Microseconds(300)}) {
    ra->MaybeTick();
    for (int i = 0; i < 20; ++i) {
      const absl::Time started = gold->Start();
      gold->Admit(false, 4096);
      clock_.Advance(each);
      gold->Finish(started);
    }
    clock_.Advance(kReserveWindow - each * 20);
  }
  ra->MaybeTick();
  a.sessions->Round();
  EXPECT_EQ(Holds(), 1u);
  // Gateway 2 has no reservation of its own; it sees gateway 1's key and holds its background
  // (1,000/s of bulk) back at the window after: 0.7x.
  EXPECT_FALSE(rb->armed());
  b.sessions->Round();
  EXPECT_TRUE(rb->armed());
  for (int w = 0; w < 2; ++w) {
    rb->MaybeTick();
    for (int i = 0; i < 250; ++i) bulk->Admit(false, 4096);
    clock_.Advance(kReserveWindow);
  }
  rb->MaybeTick();
  EXPECT_TRUE(rb->limiting());
  EXPECT_DOUBLE_EQ(rb->background_rate(), 700);
  // Gold is no longer short (no window of it since the last round): gateway 1's key goes, and
  // gateway 2 holds nothing back.
  a.sessions->Round();
  EXPECT_EQ(Holds(), 0u);
  b.sessions->Round();
  EXPECT_FALSE(rb->armed());
  EXPECT_FALSE(rb->limiting());
  EXPECT_EQ(bulk->Admit(false, 4096), absl::ZeroDuration());
}

}  // namespace
}  // namespace ringcache::gateway
