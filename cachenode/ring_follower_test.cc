// RingFollower against a real etcd (started by the test; skipped without etcd-server): the cache
// node raises its ring epoch to the cache ring the coordinator published, so a request routed on
// an older ring is refused before any newer request arrived, and it installs a newer data ring
// (never an older one).
#include "cachenode/ring_follower.h"

#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "cachenode/testing/cache_node_harness.h"
#include "datanode/client/datanode_pool.h"
#include "gtest/gtest.h"
#include "membership/cache_ring_state.h"
#include "membership/etcd_test_server.h"

namespace ringcache::cachenode {
namespace {

class RingFollowerTest : public testing::CacheNodeHarness {
 protected:
  void SetUp() override {
    if (membership::EtcdTestServer::FindBinary().empty()) {
      GTEST_SKIP() << "etcd binary not found (install the Debian package etcd-server, or set "
                      "RINGCACHE_ETCD); skipping tests against a real etcd";
    }
    auto server = membership::EtcdTestServer::Start(
        std::string("ring_follower_") +
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    membership::EtcdClient::Options options;
    options.endpoints = {server_->endpoint()};
    auto client = membership::EtcdClient::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }
  // Waits up to 10 s for `done`.
  template <typename F>
  static bool Eventually(F done) {
    for (int i = 0; i < 200; ++i) {
      if (done()) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return done();
  }
  void PublishCacheRing(uint64_t epoch) {
    membership::CacheRingState st;
    st.epoch = epoch;
    // As the coordinator publishes it: the ring and its epoch in one transaction.
    ASSERT_TRUE(client_->Txn({}, membership::CacheRingPuts("/rc", st), {}).ok());
  }
  void PublishDataRing(const datanode::DataRing& ring) {
    ASSERT_TRUE(client_
                    ->Txn({},
                          {membership::TxnOp::Put(membership::DataRingKey("/rc"),
                                                  datanode::EncodeDataRing(ring)),
                           membership::TxnOp::Put(membership::DataRingEpochKey("/rc"),
                                                  membership::EncodeRingEpoch(ring.epoch))},
                          {})
                    .ok());
  }

  std::unique_ptr<membership::EtcdTestServer> server_;
  std::unique_ptr<membership::EtcdClient> client_;
};

TEST_F(RingFollowerTest, FollowsTheCacheRingEpochAndNewerDataRings) {
  ASSERT_NO_FATAL_FAILURE(SetUpCluster(3, 2, 1));
  ASSERT_NO_FATAL_FAILURE(Start());
  CacheNodeService service(node_.get(), &registry_);
  RequestGate* gate = service.gate();
  PublishCacheRing(40);
  RingFollower::Options o;
  o.prefix = "/rc";
  o.resync = absl::Seconds(30);  // the watch must carry every later change by itself
  auto follower = RingFollower::Start(client_.get(), node_.get(), gate, o);
  EXPECT_EQ(follower->cache_epoch(), 40u) << "read once at the start";
  EXPECT_EQ(gate->epoch(), 40u);
  EXPECT_EQ(gate->Admit(39).code(), absl::StatusCode::kFailedPrecondition)
      << "a request routed on an older ring than the published one is refused";
  EXPECT_TRUE(gate->Admit(40).ok());

  // A newer ring, published while no request arrives: the watch raises the node's epoch.
  PublishCacheRing(57);
  ASSERT_TRUE(Eventually([&] { return gate->epoch() == 57u; })) << gate->epoch();
  EXPECT_EQ(gate->Admit(56).code(), absl::StatusCode::kFailedPrecondition);
  // An older published state (a deposed coordinator cannot write one; a test can) lowers
  // nothing.
  PublishCacheRing(50);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(gate->epoch(), 57u);

  // The data ring: a newer epoch is installed, an older one is not.
  datanode::DataRing ring = pool_->ring();
  const uint64_t start = ring.epoch;
  ring.epoch = start + 5;
  PublishDataRing(ring);
  ASSERT_TRUE(Eventually([&] { return node_->data_ring_epoch() == start + 5; }))
      << node_->data_ring_epoch();
  ring.epoch = start + 2;
  PublishDataRing(ring);
  ASSERT_TRUE(follower->SyncOnce().ok());
  EXPECT_EQ(node_->data_ring_epoch(), start + 5);
}

// A coordinator of an earlier release writes the rings without their epochs: the node then reads
// them whole at each resync (the watch on the epochs sees nothing).
TEST_F(RingFollowerTest, RingsWithoutTheirEpochsAreReadWholeAtResync) {
  ASSERT_NO_FATAL_FAILURE(SetUpCluster(3, 2, 1));
  ASSERT_NO_FATAL_FAILURE(Start());
  CacheNodeService service(node_.get(), &registry_);
  RequestGate* gate = service.gate();
  membership::CacheRingState st;
  st.epoch = 12;
  ASSERT_TRUE(
      client_->Put(membership::CacheRingKey("/rc"), membership::EncodeCacheRingState(st)).ok());
  RingFollower::Options o;
  o.prefix = "/rc";
  o.resync = absl::Milliseconds(200);
  auto follower = RingFollower::Start(client_.get(), node_.get(), gate, o);
  EXPECT_EQ(gate->epoch(), 12u);
  st.epoch = 19;
  ASSERT_TRUE(
      client_->Put(membership::CacheRingKey("/rc"), membership::EncodeCacheRingState(st)).ok());
  ASSERT_TRUE(Eventually([&] { return gate->epoch() == 19u; })) << gate->epoch();
  datanode::DataRing ring = pool_->ring();
  ring.epoch += 3;
  ASSERT_TRUE(client_->Put(membership::DataRingKey("/rc"), datanode::EncodeDataRing(ring)).ok());
  ASSERT_TRUE(Eventually([&] { return node_->data_ring_epoch() == ring.epoch; }));
}

}  // namespace
}  // namespace ringcache::cachenode
