// QosSessions against a real etcd (started by the test; skipped without etcd-server): two
// gateways with the same limited VDI open apply half of its limits each, one alone the whole;
// a gateway that closes the VDI, or stops, takes its key away.
#include "gateway/qos_sessions.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

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
        &clock_, [this](const std::string&) -> absl::StatusOr<v1::VdiQos> { return limits_; });
    g.sessions = std::make_unique<QosSessions>(client_.get(), g.registration.get(), "/rc", id,
                                               g.registry.get());
    return g;
  }
  size_t Keys() {
    auto r = client_->GetPrefix(QosSessionPrefix("/rc", "vm"));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->kvs.size() : 0;
  }

  v1::VdiQos limits_;
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

}  // namespace
}  // namespace ringcache::gateway
