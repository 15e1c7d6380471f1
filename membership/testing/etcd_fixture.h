// Test-only: a googletest fixture with a real etcd (EtcdTestServer, started per test; the test is
// skipped without the etcd binary), a client of it, node registrations under a short lease, and
// the small helpers the membership and election tests share.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "membership/etcd_test_server.h"
#include "membership/membership.h"

namespace ringcache::membership::testing {

// Polls `cond` every 20 ms until it holds (true) or `timeout` passes (false).
inline bool WaitFor(const std::function<bool()>& cond, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!cond()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

// A node record with distinct addresses, capacity, weight and zone derived from its id.
inline NodeRecord Node(Role role, uint32_t id) {
  NodeRecord r;
  r.role = role;
  r.id = id;
  r.address = "127.0.0.1:" + std::to_string(7000 + id);
  r.http_address = "127.0.0.1:" + std::to_string(9000 + id);
  r.capacity_bytes = uint64_t{1} << 30;
  r.weight = 1.5;
  r.zone = "z" + std::to_string(id % 2);
  return r;
}

class EtcdFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (EtcdTestServer::FindBinary().empty()) {
      GTEST_SKIP() << "etcd binary not found (install the Debian package etcd-server, or set "
                      "RINGCACHE_ETCD); skipping tests against a real etcd";
    }
    auto server =
        EtcdTestServer::Start(::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    EtcdClient::Options options;
    options.endpoints = {server_->endpoint()};
    options.dial_timeout = absl::Milliseconds(300);
    auto client = EtcdClient::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  // Registers `record` under /rc with a 2 s lease.
  absl::StatusOr<std::unique_ptr<NodeRegistration>> Register(
      NodeRecord record, Clock* clock = Clock::Real(),
      NodeRegistration::ReregisteredCallback cb = nullptr,
      absl::Duration start_timeout = absl::Seconds(60)) {
    NodeRegistration::Options o;
    o.prefix = "/rc";
    o.ttl = absl::Seconds(2);
    o.safety_margin = absl::Milliseconds(500);
    o.start_timeout = start_timeout;
    return NodeRegistration::Start(client_.get(), clock, o, std::move(record), std::move(cb));
  }

  std::unique_ptr<EtcdTestServer> server_;
  std::unique_ptr<EtcdClient> client_;
};

}  // namespace ringcache::membership::testing
