// Test-only: the set-up shared by cache node tests — M embedded data nodes (real gRPC), their
// pool, VDI 1 ("v", 64 MiB, 64 KiB objects of 4 KiB blocks) registered on them, a small
// CacheNodeConfig in a per-test directory that never goes idle on its own, and Start() to
// (re)open the cache node on the same SSD file. Tests call SetUpCluster and Start inside
// ASSERT_NO_FATAL_FAILURE, so that a failed set-up ends the test instead of leaving a null node.
//
// Thread-safety: a gtest fixture; used by the test's thread.
#ifndef RINGCACHE_CACHENODE_TESTING_CACHE_NODE_HARNESS_H_
#define RINGCACHE_CACHENODE_TESTING_CACHE_NODE_HARNESS_H_

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "cachenode/cache_node.h"
#include "cachenode/testing/embedded_datanodes.h"
#include "gtest/gtest.h"

namespace ringcache::cachenode::testing {

class CacheNodeHarness : public ::testing::Test {
 protected:
  static constexpr uint32_t kHarnessBlock = 4096;
  static constexpr uint32_t kHarnessObject = 64 * 1024;

  // Starts `data_nodes` data nodes and registers VDI 1 with `replication` on them; configures
  // cache node `node_id` (256 SSD slots, 16 RAM blocks). Call from SetUp or the test body.
  void SetUpCluster(int data_nodes, uint32_t replication, uint32_t node_id) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/" + info->test_suite_name() + "_" + info->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    dns_ = std::make_unique<EmbeddedDataNodes>(dir_, data_nodes);
    pool_ = std::move(*datanode::DataNodePool::Create(dns_->endpoints(), &registry_));
    geometry_.set_vdi_id(1);
    geometry_.set_name("v");
    geometry_.set_size_bytes(64ull << 20);
    geometry_.set_object_size(kHarnessObject);
    geometry_.set_block_size(kHarnessBlock);
    geometry_.set_replication(replication);
    // Under a loaded machine (the sanitizer pass beside other tests) a data node's first answer
    // can miss the call's deadline: try again for up to a minute before failing the test.
    absl::Status put;
    for (int attempt = 0; attempt < 30; ++attempt) {
      put = pool_->PutVdi(geometry_, datanode::DataNodePool::AllComplete);
      if (put.ok() || (!absl::IsUnavailable(put) && !absl::IsDeadlineExceeded(put))) break;
      std::this_thread::sleep_for(std::chrono::seconds(2));
    }
    ASSERT_TRUE(put.ok()) << put;
    config_.node_id = node_id;
    config_.ssd_path = dir_ + "/ssd.slots";
    config_.ssd_bytes = 256 * kHarnessBlock;
    config_.ram_bytes = 16 * kHarnessBlock;
    config_.slot_reserve = 0.1;
    config_.idle_ops_per_s = 1e9;  // never idle: destage only when a test says so
    config_.dirty_age_target_ms = 0;  // nor by age
    config_.idle_window_ms = 1000000;
  }
  void TearDown() override {
    node_.reset();
    pool_.reset();
    dns_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // (Re)opens the cache node on the configured SSD file and registers VDI 1.
  void Start() {
    node_.reset();
    auto n = CacheNode::Create(config_, pool_.get(), Clock::Real(), &registry_);
    ASSERT_TRUE(n.ok()) << n.status();
    node_ = std::move(*n);
    ASSERT_TRUE(node_->RegisterVdi(geometry_).ok());
  }

  std::string dir_;
  metrics::Registry registry_;
  std::unique_ptr<EmbeddedDataNodes> dns_;
  std::unique_ptr<datanode::DataNodePool> pool_;
  v1::VdiGeometry geometry_;
  CacheNodeConfig config_;
  std::unique_ptr<CacheNode> node_;
};

}  // namespace ringcache::cachenode::testing

#endif  // RINGCACHE_CACHENODE_TESTING_CACHE_NODE_HARNESS_H_
