// Router membership changes in one process (real CacheNodes over embedded data nodes): a cache
// node that leaves and rejoins never makes a read return stale data — neither from the blocks the
// joining node kept from before (it drops them) nor from the clean copies an old owner kept of
// objects that moved away and then came back (members drop those at the join). A cache node the
// router did not start with (cluster mode: registered in etcd, not in the cluster file) is learned
// and joins the same way, and a restarted router keeps it.
#include <filesystem>
#include <thread>
#include <atomic>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cachenode/cache_node.h"
#include "cachenode/testing/embedded_datanodes.h"
#include "tools/local/local_cache_client.h"
#include "gateway/admin_service.h"
#include "gateway/router.h"
#include "ring/ring.h"
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
    pool_ = std::move(*datanode::DataNodePool::Create(dns_->endpoints(), &registry_));
    std::vector<CacheMember> members;
    for (uint32_t id = 1; id <= 3; ++id) {
      cachenode::CacheNodeConfig cc;
      cc.node_id = id;
      cc.ssd_path = dir_ + "/ssd" + std::to_string(id);
      cc.ssd_bytes = 1024 * kBs;
      cc.ram_bytes = 16 * kBs;
      cc.idle_ops_per_s = 1e9;  // no background destage: the test decides
      cc.dirty_age_target_ms = 0;
      cc.idle_window_ms = 1000000;
      auto n = cachenode::CacheNode::Create(cc, pool_.get(), Clock::Real(), &registry_);
      ASSERT_TRUE(n.ok()) << n.status();
      nodes_.push_back(std::move(*n));
      // Node 3 is not in the "cluster file": the router learns it (LearnCacheNode).
      if (id <= 2) members.push_back({id, 1.0, local::MakeLocalCacheClient(nodes_.back().get())});
    }
    VdiDefaults defaults;
    defaults.object_size = kObj;
    auto catalog = Catalog::Open(dir_ + "/catalog.txt", defaults);
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::move(*catalog);
    router_ = NewRouter(std::move(members));
    ASSERT_NE(router_, nullptr);
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
  // Returns a router over the fixture's catalog and data nodes with `members` (node 3 comes from
  // LearnCacheNode: its address "local:3" maps to nodes_[2]), with its state in dir_.
  std::unique_ptr<Router> NewRouter(std::vector<CacheMember> members) {
    auto router = Router::Create(catalog_.get(), std::move(members), pool_.get());
    EXPECT_TRUE(router.ok()) << router.status();
    if (!router.ok()) return nullptr;
    (*router)->SetClientFactoryForTest([this](uint32_t id, const std::string& address) {
      EXPECT_EQ(address, "local:" + std::to_string(id));
      return local::MakeLocalCacheClient(nodes_[id - 1].get());
    });
    absl::Status s = (*router)->LoadRemoved(dir_ + "/removed_cache_nodes");
    EXPECT_TRUE(s.ok()) << s;
    return *std::move(router);
  }
  // The members of the "cluster file": nodes 1 and 2.
  std::vector<CacheMember> FileMembers() {
    std::vector<CacheMember> members;
    for (uint32_t id = 1; id <= 2; ++id) {
      members.push_back({id, 1.0, local::MakeLocalCacheClient(nodes_[id - 1].get())});
    }
    return members;
  }
  // Objects that node `id` owns when nodes 1 and 2 are both in the ring.
  uint64_t ObjectsOwnedBy(uint32_t id) {
    ring::RingConfig rc;
    rc.members = {{1, 1.0, ""}, {2, 1.0, ""}};
    rc.cached_owners = 1;  // as the router builds it
    auto ring = ring::Ring::Build(rc);
    EXPECT_TRUE(ring.ok());
    const uint32_t vdi = catalog_->Find("v")->geometry.vdi_id();
    uint64_t n = 0;
    for (uint64_t o = 0; o < kObjects; ++o) n += ring->Owner(ring::ObjectKey{vdi, o}) == id;
    return n;
  }
  absl::Status Remove(uint32_t id) {
    return router_->RemoveCacheNode(id, CacheNodeSettle(router_.get(), id, true), nullptr, 3);
  }

  std::string dir_;
  metrics::Registry registry_;
  std::unique_ptr<cachenode::testing::EmbeddedDataNodes> dns_;
  std::unique_ptr<datanode::DataNodePool> pool_;
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
  // Handoff: node 1 destaged the objects node 2 took over and nothing else.
  EXPECT_EQ(nodes_[0]->dirty_blocks(), ObjectsOwnedBy(1)) << "only moving objects are destaged";
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

// Fencing tokens need a new owner never to write at its predecessor's epoch: every removal and
// join advances the ring epoch, also in cluster mode where it otherwise follows etcd revisions
// (the fault checker read stale data when a removal kept the epoch).
TEST_F(RouterMembershipTest, EveryRingChangeAdvancesTheEpoch) {
  router_->SetRingEpoch(100);  // cluster mode: the etcd revision
  EXPECT_EQ(router_->ring_epoch(), 100u);
  ASSERT_TRUE(Remove(2).ok());
  const uint64_t after_remove = router_->ring_epoch();
  EXPECT_GT(after_remove, 100u);
  ASSERT_TRUE(router_->AddCacheNode(2, nullptr, 3).ok());
  EXPECT_GT(router_->ring_epoch(), after_remove);
  router_->SetRingEpoch(50);  // an older revision never lowers it
  EXPECT_GT(router_->ring_epoch(), after_remove);
  // A restarted router starts from the persisted epoch.
  const uint64_t before = router_->ring_epoch();
  router_ = NewRouter(FileMembers());
  ASSERT_NE(router_, nullptr);
  EXPECT_GE(router_->ring_epoch(), before);
}

TEST_F(RouterMembershipTest, LearnedNodeJoinsWithoutStaleReads) {
  WriteAll('a');
  ASSERT_TRUE(router_->LearnCacheNode(3, "local:3", 1.0).ok());
  EXPECT_EQ(router_->cache_node_count(), 2u) << "learned, not in the ring yet";
  EXPECT_EQ(router_->removed(), std::vector<uint32_t>{3});
  EXPECT_EQ(router_->member_ids(), (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(router_->LearnedAddress(3), "local:3");
  EXPECT_EQ(router_->LearnedAddress(1), "") << "a node of the cluster file";
  EXPECT_EQ(router_->LearnCacheNode(3, "local:3", 1.0).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(router_->LearnCacheNode(1, "local:1", 1.0).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(router_->LearnCacheNode(4, "local:4", 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StaleObjects('a'), 0);
  EXPECT_EQ(nodes_[2]->cached_blocks(), 0u) << "no request goes to a node before its join";

  ASSERT_TRUE(router_->AddCacheNode(3, nullptr, 3).ok());
  EXPECT_EQ(router_->cache_node_count(), 3u);
  EXPECT_TRUE(router_->removed().empty());
  EXPECT_EQ(StaleObjects('a'), 0);
  WriteAll('b');
  EXPECT_GT(nodes_[2]->cached_blocks(), 0u) << "node 3 owns some objects now";
  EXPECT_EQ(StaleObjects('b'), 0);

  // It leaves and comes back like any member: its 'b' copies must not be served after 'c'.
  ASSERT_TRUE(Remove(3).ok());
  WriteAll('c');
  ASSERT_TRUE(router_->AddCacheNode(3, nullptr, 3).ok());
  EXPECT_EQ(StaleObjects('c'), 0);
}

// Several gateways (membership/README.md "Control plane"): the coordinator's router publishes
// each change before it takes effect, and another gateway's router follows the published states.
// While a removal settles, the follower holds the leaving node's objects; after a removal or a
// learned node's join, both route alike, so what one writes the other reads.
TEST_F(RouterMembershipTest, AFollowerHoldsWhatTheCoordinatorSettlesAndFollowsItsRing) {
  WriteAll('a');
  auto follower = Router::Create(catalog_.get(), FileMembers(), pool_.get());
  ASSERT_TRUE(follower.ok()) << follower.status();
  (*follower)->SetClientFactoryForTest([this](uint32_t id, const std::string& address) {
    EXPECT_EQ(address, "local:" + std::to_string(id));
    return local::MakeLocalCacheClient(nodes_[id - 1].get());
  });
  absl::Mutex mu;
  std::vector<CacheRingState> published;
  router_->SetPublisher([&](const CacheRingState& st) {
    {
      absl::MutexLock l(&mu);
      published.push_back(st);
    }
    return (*follower)->FollowRingState(st);
  });
  auto last = [&] {
    absl::MutexLock l(&mu);
    return published.back();
  };
  ASSERT_TRUE(router_->TakeOver(/*min_epoch=*/10).ok());
  EXPECT_EQ(router_->ring_epoch(), 11u) << "above the previous leader's and the minimum";
  EXPECT_EQ((*follower)->ring_epoch(), 11u);
  EXPECT_EQ((*follower)->FollowRingState(last()).code(), absl::StatusCode::kOk) << "old: ignored";
  EXPECT_EQ(router_->FollowRingState([&] {
              CacheRingState st = last();
              st.epoch = 99;
              return st;
            }()).code(),
            absl::StatusCode::kFailedPrecondition)
      << "the publisher does not follow";
  auto fdev = (*follower)->Open("v");
  ASSERT_TRUE(fdev.ok());

  const uint32_t vdi = catalog_->Find("v")->geometry.vdi_id();
  uint64_t object = kObjects;
  {
    ring::RingConfig rc;
    rc.members = {{1, 1.0, ""}, {2, 1.0, ""}};
    rc.cached_owners = 1;
    auto ring = ring::Ring::Build(rc);
    for (uint64_t o = 0; o < kObjects && object == kObjects; ++o) {
      if (ring->Owner(ring::ObjectKey{vdi, o}) == 1) object = o;
    }
  }
  ASSERT_LT(object, kObjects);
  const std::string b = Block('b', object);
  std::atomic<bool> wrote{false};
  std::thread writer;
  auto settle = CacheNodeSettle(router_.get(), 1, true);
  absl::Status removed = router_->RemoveCacheNode(
      1,
      [&](CacheClient* c, bool alive) {
        const CacheRingState st = last();
        EXPECT_EQ(st.removing, std::vector<uint32_t>{1});
        EXPECT_EQ(st.epoch, 12u);
        EXPECT_EQ(router_->ring_epoch(), 12u) << "routed with only after it was published";
        if (!writer.joinable()) {
          writer = std::thread([&] {
            EXPECT_TRUE((*fdev)->Write(object * kObj, kBs, b.data(), false).ok());
            wrote = true;
          });
          absl::SleepFor(absl::Milliseconds(200));
          EXPECT_FALSE(wrote.load()) << "the follower holds the leaving node's objects";
        }
        return settle(c, alive);
      },
      nullptr, 3);
  ASSERT_TRUE(removed.ok()) << removed;
  writer.join();
  EXPECT_TRUE(wrote.load());
  EXPECT_EQ(last().removed, std::vector<uint32_t>{1});
  EXPECT_TRUE(last().removing.empty());
  EXPECT_EQ((*follower)->ring_epoch(), router_->ring_epoch());
  EXPECT_EQ((*follower)->removed(), std::vector<uint32_t>{1});
  std::string got(kBs, '\0');
  ASSERT_TRUE(dev_->Read(object * kObj, kBs, got.data()).ok());
  EXPECT_EQ(got, b) << "written through the follower, read through the coordinator";

  // A node the coordinator learned joins; the follower learns it from the published ring.
  ASSERT_TRUE(router_->LearnCacheNode(3, "local:3", 1.0).ok());
  ASSERT_TRUE(router_->AddCacheNode(3, nullptr, 3).ok());
  EXPECT_EQ((*follower)->member_ids(), (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ((*follower)->removed(), std::vector<uint32_t>{1});
  EXPECT_EQ((*follower)->ring_epoch(), router_->ring_epoch());
  for (uint64_t o = 0; o < kObjects; ++o) {
    const std::string c = Block('c', o);
    ASSERT_TRUE((*fdev)->Write(o * kObj, kBs, c.data(), false).ok());
  }
  EXPECT_EQ(StaleObjects('c'), 0) << "both route every object to the same node";
  EXPECT_GT(nodes_[2]->cached_blocks(), 0u);
  {
    absl::MutexLock l(&mu);
    for (size_t i = 1; i < published.size(); ++i) {
      EXPECT_GT(published[i].epoch, published[i - 1].epoch) << "every published state is newer";
    }
  }
  router_->SetPublisher(nullptr);
  dev_.reset();
  fdev->reset();
}

TEST_F(RouterMembershipTest, ATermThatEndsDuringARemovalLeavesTheRingToTheSuccessor) {
  WriteAll('a');
  router_->SetPublisher([](const CacheRingState&) { return absl::OkStatus(); });
  ASSERT_TRUE(router_->TakeOver(/*min_epoch=*/10).ok());
  const uint64_t before = router_->ring_epoch();
  CacheRingState successor;  // what the next coordinator publishes meanwhile
  successor.epoch = 50;
  successor.removing = {2};
  auto settle = CacheNodeSettle(router_.get(), 1, true);
  absl::Status removed = router_->RemoveCacheNode(
      1,
      [&](CacheClient* c, bool alive) {
        // The term ends here (the step-down clears the publisher) and the successor publishes.
        router_->SetPublisher(nullptr);
        EXPECT_EQ(router_->FollowRingState(successor).code(), absl::StatusCode::kFailedPrecondition)
            << "not followed while this router's own change winds down";
        return settle(c, alive);
      },
      nullptr, 3);
  EXPECT_EQ(removed.code(), absl::StatusCode::kFailedPrecondition) << removed;
  EXPECT_NE(removed.message().find("term ended"), std::string::npos) << removed;
  EXPECT_TRUE(router_->removed().empty()) << "the unpublished outcome is not applied";
  EXPECT_EQ(router_->ring_epoch(), before + 1) << "only the published start was routed with";
  ASSERT_TRUE(router_->FollowRingState(successor).ok()) << "followed once the change ended";
  EXPECT_EQ(router_->ring_epoch(), 50u);
  EXPECT_TRUE(router_->removed().empty());
}

TEST_F(RouterMembershipTest, RestartedRouterKeepsLearnedNodes) {
  ASSERT_TRUE(router_->LearnCacheNode(3, "local:3", 2.0).ok());
  {
    // Restarted before the join: node 3 is known and still out of the ring.
    std::unique_ptr<Router> again = NewRouter(FileMembers());
    EXPECT_EQ(again->member_ids(), (std::vector<uint32_t>{1, 2, 3}));
    EXPECT_EQ(again->removed(), std::vector<uint32_t>{3});
    EXPECT_EQ(again->LearnedAddress(3), "local:3");
  }
  ASSERT_TRUE(router_->AddCacheNode(3, nullptr, 3).ok());
  WriteAll('a');
  ASSERT_GT(nodes_[2]->cached_blocks(), 0u);
  // Restarted after the join: the same ring, so every object reads back from its owner (node 3
  // holds dirty blocks that no other node or data node has).
  dev_.reset();
  router_ = NewRouter(FileMembers());
  ASSERT_NE(router_, nullptr);
  EXPECT_EQ(router_->cache_node_count(), 3u);
  EXPECT_TRUE(router_->removed().empty());
  auto dev = router_->Open("v");
  ASSERT_TRUE(dev.ok()) << dev.status();
  dev_ = *std::move(dev);
  EXPECT_EQ(StaleObjects('a'), 0);
}

TEST_F(RouterMembershipTest, RemovedIdsTheRouterDoesNotKnowAreForgotten) {
  // A gateway stopped between LearnCacheNode's two writes: the removed file names node 9, the
  // learned file does not.
  {
    std::ofstream f(dir_ + "/removed_cache_nodes");
    f << "# removed\n2\n9\n";
  }
  std::unique_ptr<Router> again = NewRouter(FileMembers());
  EXPECT_EQ(again->removed(), std::vector<uint32_t>{2});
  EXPECT_EQ(again->cache_node_count(), 1u);
}

TEST_F(RouterMembershipTest, JoinHoldsOnlyTheObjectsThatMove) {
  ASSERT_TRUE(Remove(2).ok());
  WriteAll('a');
  ring::RingConfig rc;
  rc.members = {{1, 1.0, ""}, {2, 1.0, ""}};
  rc.cached_owners = 1;
  auto ring = ring::Ring::Build(rc);
  ASSERT_TRUE(ring.ok());
  const uint32_t vdi = catalog_->Find("v")->geometry.vdi_id();
  int64_t stays = -1, moves = -1;
  for (uint64_t o = 0; o < kObjects; ++o) {
    (ring->Owner(ring::ObjectKey{vdi, o}) == 1 ? stays : moves) = static_cast<int64_t>(o);
  }
  ASSERT_GE(stays, 0);
  ASSERT_GE(moves, 0);
  // In the middle of the join (the hook runs before the ring grows): a write to an object that
  // stays with node 1 completes; one to an object that moves to node 2 waits for the join.
  std::atomic<bool> moving_done{false};
  std::thread moving_writer;
  bool stay_done = false;
  router_->SetJoinHook([&](uint32_t, CacheClient*) {
    const std::string b = Block('s', stays);
    std::atomic<bool> done{false};
    std::thread t([&] {
      EXPECT_TRUE(dev_->Write(stays * kObj, kBs, b.data(), false).ok());
      done = true;
    });
    for (int i = 0; i < 3000 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stay_done = done;
    t.join();  // (a write held by the join would hang here: the test times out)
    moving_writer = std::thread([&] {
      const std::string m = Block('m', moves);
      EXPECT_TRUE(dev_->Write(moves * kObj, kBs, m.data(), false).ok());
      moving_done = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(moving_done.load()) << "a moving object was written during its handoff";
    return absl::OkStatus();
  });
  ASSERT_TRUE(router_->AddCacheNode(2, nullptr, 3).ok());
  moving_writer.join();
  EXPECT_TRUE(stay_done) << "a write to an object that does not move waited for the join";
  EXPECT_TRUE(moving_done.load());
  std::string buf(kBs, '\0');
  ASSERT_TRUE(dev_->Read(stays * kObj, kBs, buf.data()).ok());
  EXPECT_EQ(buf, Block('s', stays));
  ASSERT_TRUE(dev_->Read(moves * kObj, kBs, buf.data()).ok());
  EXPECT_EQ(buf, Block('m', moves));
  EXPECT_GT(nodes_[1]->dirty_blocks(), 0u) << "the moved object's write went to node 2";
}

// A reweight (ringcachectl node resize: the weight follows the SSD tier) moves objects both
// ways, each with a handoff: the members destage what they lose and drop their clean copies of
// it, so an object that moves away and comes back never meets a stale copy. The weight is
// published (a follower routes alike) and kept across a restart.
TEST_F(RouterMembershipTest, AReweightMovesObjectsBothWaysWithoutStaleReads) {
  absl::Mutex mu;
  std::vector<CacheRingState> published;
  router_->SetPublisher([&](const CacheRingState& st) {
    absl::MutexLock l(&mu);
    published.push_back(st);
    return absl::OkStatus();
  });
  const uint32_t vdi = catalog_->Find("v")->geometry.vdi_id();
  auto owned = [&](double w2, uint32_t id) {
    ring::RingConfig rc;
    rc.members = {{1, 1.0, ""}, {2, w2, ""}};
    rc.cached_owners = 1;
    auto ring = ring::Ring::Build(rc);
    EXPECT_TRUE(ring.ok());
    uint64_t n = 0;
    for (uint64_t o = 0; o < kObjects; ++o) n += ring->Owner(ring::ObjectKey{vdi, o}) == id;
    return n;
  };
  ASSERT_LT(owned(1.0, 2), owned(3.0, 2)) << "a heavier node owns more";
  WriteAll('a');
  ASSERT_TRUE(router_->ReweightCacheNode(2, 3.0, 3u << 20, nullptr, 3).ok());
  EXPECT_EQ(router_->RingMembers(),
            (std::vector<std::pair<uint32_t, double>>{{1, 1.0}, {2, 3.0}}));
  EXPECT_EQ(router_->RingWeight(2)->capacity_bytes, 3u << 20);
  // Node 1 destaged the objects it lost and nothing else (the test's nodes never destage alone).
  EXPECT_EQ(nodes_[0]->dirty_blocks(), owned(3.0, 1));
  EXPECT_EQ(StaleObjects('a'), 0);
  WriteAll('b');
  EXPECT_EQ(nodes_[1]->dirty_blocks(), owned(3.0, 2)) << "node 2 took its new objects' writes";
  // And back below its first weight: node 2's objects go to node 1, which must not serve the
  // 'a' copies it had of them before the first reweight.
  ASSERT_TRUE(router_->ReweightCacheNode(2, 0.25, 256u << 10, nullptr, 3).ok());
  EXPECT_EQ(StaleObjects('b'), 0);
  EXPECT_EQ(nodes_[1]->dirty_blocks(), owned(0.25, 2));
  WriteAll('c');
  EXPECT_EQ(StaleObjects('c'), 0);
  {
    absl::MutexLock l(&mu);
    ASSERT_EQ(published.size(), 4u) << "a start and an outcome per reweight";
    EXPECT_EQ(published[0].reweighting, (CacheRingState::Weight{2, 3.0, 3u << 20}));
    EXPECT_TRUE(published[0].weights.empty());
    EXPECT_EQ(published[1].reweighting.id, 0u);
    EXPECT_EQ(published[3].weights,
              (std::vector<CacheRingState::Weight>{{2, 0.25, 256u << 10}}));
  }
  // Nothing else may start while a reweight runs; an unknown or removed node has no weight.
  EXPECT_EQ(router_->ReweightCacheNode(9, 2, 1, nullptr, 1).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(router_->ReweightCacheNode(1, 0, 1, nullptr, 1).code(),
            absl::StatusCode::kInvalidArgument);

  // A gateway that follows the coordinator routes with the weights it published.
  auto follower = Router::Create(catalog_.get(), FileMembers(), pool_.get());
  ASSERT_TRUE(follower.ok()) << follower.status();
  {
    absl::MutexLock l(&mu);
    ASSERT_TRUE((*follower)->FollowRingState(published[2]).ok());
    EXPECT_EQ((*follower)->RingMembers(),
              (std::vector<std::pair<uint32_t, double>>{{1, 1.0}, {2, 3.0}}))
        << "the ring keeps its weights while a reweight runs";
    ASSERT_TRUE((*follower)->FollowRingState(published[3]).ok());
  }
  EXPECT_EQ((*follower)->RingMembers(),
            (std::vector<std::pair<uint32_t, double>>{{1, 1.0}, {2, 0.25}}));
  // A restarted gateway keeps the weight (with the removals).
  dev_.reset();
  router_ = NewRouter(FileMembers());
  ASSERT_NE(router_, nullptr);
  EXPECT_EQ(router_->RingMembers(),
            (std::vector<std::pair<uint32_t, double>>{{1, 1.0}, {2, 0.25}}));
  auto dev = router_->Open("v");
  ASSERT_TRUE(dev.ok()) << dev.status();
  dev_ = *std::move(dev);
  EXPECT_EQ(StaleObjects('c'), 0);
}

TEST_F(RouterMembershipTest, AddCacheNodeRefusesMembersAndUnknownIds) {
  EXPECT_EQ(router_->AddCacheNode(1, nullptr, 1).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(router_->AddCacheNode(9, nullptr, 1).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ringcache::gateway
