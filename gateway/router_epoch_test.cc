// Ring epochs on the data path, router side: a request the owner refuses as stale (it has seen a
// newer cache ring, e.g. from another gateway) did nothing and is retried by the router, and
// succeeds once the router's ring caught up. The cache nodes are real (in process); their
// clients enforce the same RingEpochGuard as the gRPC service does.
#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cachenode/cache_node.h"
#include "cachenode/service.h"
#include "cachenode/testing/embedded_datanodes.h"
#include "tools/local/local_cache_client.h"
#include "gateway/router.h"
#include "gtest/gtest.h"

namespace ringcache::gateway {
namespace {

constexpr uint32_t kBs = 4096;
constexpr uint32_t kObj = 64 * 1024;

// A local client that admits block requests through a RingEpochGuard, like the gRPC service.
class GuardedClient : public CacheClient {
 public:
  explicit GuardedClient(cachenode::CacheNode* node) : inner_(local::MakeLocalCacheClient(node)) {}
  cachenode::RingEpochGuard& guard() { return guard_; }
  int refused() const { return refused_.load(); }

  absl::Status Read(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                    char* out) override {
    if (absl::Status s = Admit(); !s.ok()) return s;
    return inner_->Read(vdi, object, offset, len, out);
  }
  absl::Status Write(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                     const char* data) override {
    if (absl::Status s = Admit(); !s.ok()) return s;
    return inner_->Write(vdi, object, offset, len, data);
  }
  absl::Status Trim(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                    bool zero) override {
    if (absl::Status s = Admit(); !s.ok()) return s;
    return inner_->Trim(vdi, object, offset, len, zero);
  }
  absl::Status Prefetch(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len) override {
    if (absl::Status s = Admit(); !s.ok()) return s;
    return inner_->Prefetch(vdi, object, offset, len);
  }
  absl::Status Allocation(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                          std::vector<bool>* allocated) override {
    if (absl::Status s = Admit(); !s.ok()) return s;
    return inner_->Allocation(vdi, object, offset, len, allocated);
  }
  absl::Status RegisterVdi(const v1::VdiGeometry& vdi, v1::CacheMode mode,
                           const std::string& policy) override {
    return inner_->RegisterVdi(vdi, mode, policy);
  }
  absl::Status SetPolicy(uint32_t vdi, const std::string& policy) override {
    return inner_->SetPolicy(vdi, policy);
  }
  absl::Status DropVdi(uint32_t vdi) override { return inner_->DropVdi(vdi); }
  absl::StatusOr<Invalidated> InvalidateVdi(uint32_t vdi) override {
    return inner_->InvalidateVdi(vdi);
  }
  absl::Status SetMode(uint32_t vdi, v1::CacheMode mode) override {
    return inner_->SetMode(vdi, mode);
  }
  absl::StatusOr<uint64_t> Flush(uint32_t vdi) override { return inner_->Flush(vdi); }
  absl::Status FlushMoving(const std::vector<ring::Member>& next) override {
    return inner_->FlushMoving(next);
  }
  absl::Status Stats(uint32_t vdi, std::vector<v1::VdiCacheStats>* out) override {
    return inner_->Stats(vdi, out);
  }
  absl::Status Probe(int timeout_ms) override { return inner_->Probe(timeout_ms); }
  absl::StatusOr<NodeHealth> Health(int timeout_ms) override {
    return inner_->Health(timeout_ms);
  }
  absl::StatusOr<uint64_t> DropBlocks(bool all, const std::vector<ring::Member>& ring) override {
    return inner_->DropBlocks(all, ring);
  }
  absl::Status SetDataRing(const datanode::DataRing& ring) override {
    return inner_->SetDataRing(ring);
  }

 private:
  absl::Status Admit() {
    inner_->SetRingEpoch(ring_epoch());
    absl::Status s = guard_.Admit(ring_epoch());
    if (!s.ok()) refused_.fetch_add(1);
    return s;
  }
  std::unique_ptr<CacheClient> inner_;
  cachenode::RingEpochGuard guard_;
  std::atomic<int> refused_{0};
};

TEST(RouterEpochTest, StaleRequestIsRetriedOnceTheRingCaughtUp) {
  const std::string dir = ::testing::TempDir() + "/router_epoch_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  metrics::Registry registry;
  cachenode::testing::EmbeddedDataNodes dns(dir, 2);
  auto pool = datanode::DataNodePool::Create(dns.endpoints(), &registry);
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::vector<std::unique_ptr<cachenode::CacheNode>> nodes;
  std::vector<GuardedClient*> clients;
  std::vector<CacheMember> members;
  for (uint32_t id = 1; id <= 2; ++id) {
    cachenode::CacheNodeConfig cc;
    cc.node_id = id;
    cc.ssd_path = dir + "/ssd" + std::to_string(id);
    cc.ssd_bytes = 256 * kBs;
    cc.ram_bytes = 16 * kBs;
    auto n = cachenode::CacheNode::Create(cc, pool->get(), Clock::Real(), &registry);
    ASSERT_TRUE(n.ok()) << n.status();
    nodes.push_back(std::move(*n));
    auto c = std::make_unique<GuardedClient>(nodes.back().get());
    clients.push_back(c.get());
    members.push_back({id, 1.0, std::move(c)});
  }
  auto catalog = Catalog::Open(dir + "/catalog.txt", VdiDefaults{kObj, kBs, 1});
  ASSERT_TRUE(catalog.ok());
  auto router = Router::Create(catalog->get(), std::move(members), pool->get());
  ASSERT_TRUE(router.ok()) << router.status();
  ASSERT_TRUE((*router)->CreateVdi("v", 16 * kObj, kObj, 1).ok());
  auto dev = (*router)->Open("v");
  ASSERT_TRUE(dev.ok());
  EXPECT_EQ((*router)->ring_epoch(), 1u) << "static mode: no removals yet";

  const std::string a(kBs, 'a'), b(kBs, 'b');
  for (uint64_t o = 0; o < 16; ++o) ASSERT_TRUE((*dev)->Write(o * kObj, kBs, a.data(), false).ok());
  for (GuardedClient* c : clients) EXPECT_EQ(c->guard().highest(), 1u);

  // Another sender moved both nodes to epoch 40: this router's requests are now stale.
  for (GuardedClient* c : clients) ASSERT_TRUE(c->guard().Admit(40).ok());
  std::atomic<bool> done{false};
  absl::Status result;
  std::thread writer([&] {
    result = (*dev)->Write(3 * kObj, kBs, b.data(), false);
    done.store(true);
  });
  // Wait (bounded, not timed) until the write was refused at least once, then catch up.
  for (int i = 0; i < 3000 && clients[0]->refused() + clients[1]->refused() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GT(clients[0]->refused() + clients[1]->refused(), 0);
  EXPECT_FALSE(done.load()) << "a refused request is retried, not failed";
  (*router)->SetRingEpoch(40);
  writer.join();
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ((*router)->ring_epoch(), 40u);
  std::string got(kBs, '\0');
  ASSERT_TRUE((*dev)->Read(3 * kObj, kBs, got.data()).ok());
  EXPECT_EQ(got, b);
  ASSERT_TRUE((*dev)->Read(4 * kObj, kBs, got.data()).ok());
  EXPECT_EQ(got, a);
  dev->reset();
  router->reset();
  nodes.clear();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ringcache::gateway
