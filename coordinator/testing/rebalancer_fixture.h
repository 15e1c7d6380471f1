// The data rebalancer's test fixture (data_rebalancer_test.cc, data_rebalancer_actions_test.cc):
// real data nodes (embedded gRPC servers), real cache nodes each with its own data node pool (as
// separate processes have), the router and the rebalancer, in one process.
#ifndef RINGCACHE_GATEWAY_TESTING_REBALANCER_FIXTURE_H_
#define RINGCACHE_GATEWAY_TESTING_REBALANCER_FIXTURE_H_

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "cachenode/cache_node.h"
#include "common/clock.h"
#include "cachenode/testing/embedded_datanodes.h"
#include "coordinator/data_rebalancer.h"
#include "datanode/client/log_replay.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/local/local_cache_client.h"

namespace ringcache::coordinator::testing {

inline constexpr uint32_t kBs = 4096;
inline constexpr uint32_t kObj = 16 * kBs;
inline constexpr uint64_t kObjects = 48;
inline constexpr uint64_t kBlocks = kObjects * kObj / kBs;
inline constexpr uint32_t kReplication = 2;

class DataRebalancerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/data_rebalancer_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    dns_ = std::make_unique<cachenode::testing::EmbeddedDataNodes>(dir_, 4);
    // Data nodes 1-3 form the ring; the fourth joins later.
    initial_.nodes.assign(dns_->endpoints().begin(), dns_->endpoints().begin() + 3);
    for (const auto& e : initial_.nodes) initial_.members.push_back(e.id);
    gateway_pool_ = std::move(*datanode::DataNodePool::Create(initial_, &registry_));
    std::vector<gateway::CacheMember> members;
    for (uint32_t id = 1; id <= 2; ++id) {
      auto pool = datanode::DataNodePool::Create(initial_, &registry_);
      ASSERT_TRUE(pool.ok()) << pool.status();
      cache_pools_.push_back(std::move(*pool));
      cachenode::CacheNodeConfig cc;
      cc.node_id = id;
      cc.ssd_path = dir_ + "/ssd" + std::to_string(id);
      cc.ssd_bytes = 4096 * kBs;
      cc.ram_bytes = 16 * kBs;
      cc.idle_ops_per_s = 0;  // no destage but the tests' own: dirty blocks stay dirty
      cc.dirty_age_target_ms = 0;
      auto n =
          cachenode::CacheNode::Create(cc, cache_pools_.back().get(), Clock::Real(), &registry_);
      ASSERT_TRUE(n.ok()) << n.status();
      nodes_.push_back(std::move(*n));
      members.push_back({id, 1.0, local::MakeLocalCacheClient(nodes_.back().get())});
    }
    VdiDefaults defaults;
    defaults.object_size = kObj;
    auto catalog = Catalog::Open(dir_ + "/catalog.txt", defaults);
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::move(*catalog);
    auto router = gateway::Router::Create(catalog_.get(), std::move(members), gateway_pool_.get());
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = std::move(*router);
    ASSERT_TRUE(router_->CreateVdi("v", kObjects * kObj, kObj, kReplication).ok());
    auto dev = router_->Open("v");
    ASSERT_TRUE(dev.ok()) << dev.status();
    dev_ = *std::move(dev);
    expected_.assign(kBlocks, std::string(kBs, '\0'));
  }
  void TearDown() override {
    rebalancer_.reset();
    extra_pools_.clear();
    dev_.reset();
    router_.reset();
    nodes_.clear();
    cache_pools_.clear();
    gateway_pool_.reset();
    dns_.reset();
    std::filesystem::remove_all(dir_);
  }
  static std::string Block(uint64_t block, int round) {
    std::string b(kBs, static_cast<char>('a' + (block * 7 + round) % 26));
    std::memcpy(b.data(), &block, sizeof(block));
    std::memcpy(b.data() + 8, &round, sizeof(round));
    return b;
  }
  void WriteBlock(uint64_t block, int round) {
    const std::string b = Block(block, round);
    ASSERT_TRUE(dev_->Write(block * kBs, kBs, b.data(), false).ok()) << block;
    expected_[block] = b;
  }
  // Reads every block from the data nodes (the cache nodes drop what they hold first).
  int WrongBlocks() {
    EXPECT_TRUE(router_->Flush("", nullptr).ok());
    for (auto& n : nodes_) EXPECT_TRUE(n->DropBlocks(true, nullptr).ok());
    int wrong = 0;
    std::string buf(kBs, '\0');
    for (uint64_t b = 0; b < kBlocks; ++b) {
      EXPECT_TRUE(dev_->Read(b * kBs, kBs, buf.data()).ok()) << b;
      if (buf != expected_[b]) ++wrong;
    }
    return wrong;
  }

  // Starts the rebalancer over the three data nodes (fast retries) and waits until it is idle.
  // Every block written and flushed, write-through from then on (every write goes home during a
  // move), and the rebalancer started and idle: its ring saved in dir_, pages of 16 blocks (many
  // pages: writes interleave with the scan), retries every 50 ms.
  void StartIdleWriteThrough() {
    for (uint64_t b = 0; b < kBlocks; ++b) WriteBlock(b, 0);
    ASSERT_TRUE(router_->Flush("", nullptr).ok());
    ASSERT_TRUE(router_->SetMode("v", v1::WRITETHROUGH).ok());
    DataRebalancer::Options o;
    o.state_path = dir_ + "/data_ring";
    o.scan_page = 16;
    o.retry_interval = absl::Milliseconds(50);
    rebalancer_ = DataRebalancer::Start(router_.get(), gateway_pool_.get(), o);
    ASSERT_TRUE(rebalancer_->WaitIdle(absl::Seconds(30)));
  }
  void StartOverInitialNodes() {
    DataRebalancer::Options o;
    o.scan_page = 16;
    o.retry_interval = absl::Milliseconds(50);
    o.heal_interval = absl::Milliseconds(100);
    rebalancer_ = DataRebalancer::Start(router_.get(), gateway_pool_.get(), o);
    rebalancer_->Add(initial_.nodes);
    ASSERT_TRUE(rebalancer_->WaitIdle(absl::Seconds(30)));
  }

  // Blocks (or tombstones) a data node stores for an object it is not a home of in the ring
  // of all four data nodes.
  int StoredOffHome() {
    auto ring = datanode::BuildDataRing(dns_->endpoints());
    EXPECT_TRUE(ring.ok());
    int off = 0;
    for (int i = 0; i < 4; ++i) {
      const uint32_t id = dns_->endpoints()[i].id;
      datanode::ScannedBlock next;
      bool done = false;
      auto all = dns_->store(i)->ScanBlocks(0, 0, 0, 100000, false, &next, &done);
      EXPECT_TRUE(all.ok() && done);
      if (!all.ok()) continue;
      for (const auto& b : *all) {
        auto homes = ring->Owners({b.vdi_id, b.object_index}, kReplication);
        if (homes.ok() && std::find(homes->begin(), homes->end(), id) == homes->end()) ++off;
      }
    }
    return off;
  }

  std::string dir_;
  metrics::Registry registry_;
  std::unique_ptr<cachenode::testing::EmbeddedDataNodes> dns_;
  datanode::DataRing initial_;
  std::unique_ptr<datanode::DataNodePool> gateway_pool_;
  std::vector<std::unique_ptr<datanode::DataNodePool>> cache_pools_;
  std::vector<std::unique_ptr<cachenode::CacheNode>> nodes_;
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<gateway::Router> router_;
  std::shared_ptr<gateway::BlockDevice> dev_;
  // A clock the rebalancer may be given (Options::clock): declared before it, so it outlives
  // the rebalancer's thread (TearDown stops the rebalancer after the test body's locals are gone).
  SimulatedClock sim_clock_;
  std::unique_ptr<DataRebalancer> rebalancer_;
  // Pools of further rebalancers (another coordinator's); they outlive rebalancer_ (TearDown).
  std::vector<std::unique_ptr<datanode::DataNodePool>> extra_pools_;
  std::vector<std::string> expected_;
};

// Waits (up to a minute) until the rebalancer's status satisfies `done`.
inline bool WaitFor(const DataRebalancer& r,
                    const std::function<bool(const v1::DataRebalance&)>& done) {
  for (int i = 0; i < 600; ++i) {
    if (done(r.Status())) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

}  // namespace ringcache::coordinator::testing

#endif  // RINGCACHE_GATEWAY_TESTING_REBALANCER_FIXTURE_H_
