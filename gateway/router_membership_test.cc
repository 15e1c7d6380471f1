// Router membership changes in one process (real CacheNodes over embedded data nodes): a cache
// node that leaves and rejoins never makes a read return stale data — neither from the blocks the
// joining node kept from before (it drops them) nor from the clean copies an old owner kept of
// objects that moved away and then came back (members drop those at the join).
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cachenode/cache_node.h"
#include "cachenode/testing/embedded_datanodes.h"
#include "gateway/admin_service.h"
#include "gateway/router.h"
#include "gtest/gtest.h"

namespace ringcache::gateway {
namespace {

constexpr uint32_t kBs = 4096;
constexpr uint32_t kObj = 64 * 1024;
constexpr uint64_t kObjects = 64;

class RouterMembershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One directory per test: ctest runs the tests of this file in parallel processes.
    dir_ = ::testing::TempDir() + "/router_membership_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    dns_ = std::make_unique<cachenode::testing::EmbeddedDataNodes>(dir_, 3);
    pool_ = std::move(*cachenode::DataNodePool::Create(dns_->endpoints(), &registry_));
    std::vector<CacheMember> members;
    for (uint32_t id = 1; id <= 2; ++id) {
      cachenode::CacheNodeConfig cc;
      cc.node_id = id;
      cc.ssd_path = dir_ + "/ssd" + std::to_string(id);
      cc.ssd_bytes = 1024 * kBs;
      cc.ram_bytes = 16 * kBs;
      cc.idle_ops_per_s = 1e9;  // no background destage: the test decides
      cc.idle_window_ms = 1000000;
      auto n = cachenode::CacheNode::Create(cc, pool_.get(), Clock::Real(), &registry_);
      ASSERT_TRUE(n.ok()) << n.status();
      nodes_.push_back(std::move(*n));
      members.push_back({id, 1.0, MakeLocalCacheClient(nodes_.back().get())});
    }
    VdiDefaults defaults;
    defaults.object_size = kObj;
    auto catalog = Catalog::Open(dir_ + "/catalog.txt", defaults);
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::move(*catalog);
    auto router = Router::Create(catalog_.get(), std::move(members), pool_.get());
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = std::move(*router);
    ASSERT_TRUE(router_->CreateVdi("v", kObjects * kObj, kObj, 2).ok());
    auto dev = router_->Open("v");
    ASSERT_TRUE(dev.ok()) << dev.status();
    dev_ = *std::move(dev);
  }
  void TearDown() override {
    dev_.reset();
    router_.reset();
    nodes_.clear();
    pool_.reset();
    dns_.reset();
    std::filesystem::remove_all(dir_);
  }
  static std::string Block(char phase, uint64_t object) {
    return std::string(kBs, static_cast<char>(phase + object % 7));
  }
  // Writes the first block of every object.
  void WriteAll(char phase) {
    for (uint64_t o = 0; o < kObjects; ++o) {
      const std::string b = Block(phase, o);
      ASSERT_TRUE(dev_->Write(o * kObj, kBs, b.data(), false).ok()) << o;
    }
  }
  // Returns how many objects do not read back `phase`.
  int StaleObjects(char phase) {
    int stale = 0;
    std::string buf(kBs, '\0');
    for (uint64_t o = 0; o < kObjects; ++o) {
      EXPECT_TRUE(dev_->Read(o * kObj, kBs, buf.data()).ok()) << o;
      if (buf != Block(phase, o)) ++stale;
    }
    return stale;
  }
  absl::Status Remove(uint32_t id) {
    return router_->RemoveCacheNode(id, CacheNodeSettle(router_.get(), id, true), nullptr, 3);
  }

  std::string dir_;
  metrics::Registry registry_;
  std::unique_ptr<cachenode::testing::EmbeddedDataNodes> dns_;
  std::unique_ptr<cachenode::DataNodePool> pool_;
  std::vector<std::unique_ptr<cachenode::CacheNode>> nodes_;
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<Router> router_;
  std::shared_ptr<BlockDevice> dev_;
};

TEST_F(RouterMembershipTest, LeaveAndRejoinNeverReadsStaleData) {
  WriteAll('a');
  ASSERT_EQ(StaleObjects('a'), 0);
  ASSERT_GT(nodes_[1]->cached_blocks(), 0u) << "node 2 owns some objects";

  // Node 2 leaves (destaged first); everything is node 1's. Node 2 keeps clean 'a' copies.
  ASSERT_TRUE(Remove(2).ok());
  EXPECT_EQ(router_->cache_node_count(), 1u);
  WriteAll('b');
  EXPECT_EQ(StaleObjects('b'), 0);

  // Node 2 rejoins: it must not serve its 'a' copies of the objects it gets back.
  ASSERT_TRUE(router_->AddCacheNode(2, nullptr, 3).ok());
  EXPECT_EQ(router_->cache_node_count(), 2u);
  EXPECT_TRUE(router_->removed().empty());
  EXPECT_EQ(nodes_[0]->dirty_blocks(), 0u) << "every member destaged at the join";
  EXPECT_EQ(StaleObjects('b'), 0);

  // Node 1 lost objects to node 2 at the join; when they come back it must not serve its old
  // 'b' copies of them.
  WriteAll('c');
  ASSERT_TRUE(Remove(2).ok());
  EXPECT_EQ(StaleObjects('c'), 0);

  // Twice more, to be sure a second rejoin works the same way.
  ASSERT_TRUE(router_->AddCacheNode(2, nullptr, 3).ok());
  EXPECT_EQ(StaleObjects('c'), 0);
  WriteAll('d');
  EXPECT_EQ(StaleObjects('d'), 0);
}

TEST_F(RouterMembershipTest, AddCacheNodeRefusesMembersAndUnknownIds) {
  EXPECT_EQ(router_->AddCacheNode(1, nullptr, 1).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(router_->AddCacheNode(9, nullptr, 1).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ringcache::gateway
