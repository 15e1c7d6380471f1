// Data rebalancing in one process: real data nodes (embedded gRPC servers), real cache nodes each
// with its own data node pool (as separate processes have), the router and the rebalancer. A data
// node joins while a writer keeps writing and trimming through the router in write-through mode
// (so every write goes home during the move); afterwards every block reads back as last written,
// from the data nodes (the cache dropped), and each block is stored exactly on its new homes.
#include "gateway/data_rebalancer.h"

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
#include "datanode/client/log_replay.h"
#include "cachenode/testing/embedded_datanodes.h"
#include "tools/local/local_cache_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringcache::gateway {
namespace {

constexpr uint32_t kBs = 4096;
constexpr uint32_t kObj = 16 * kBs;
constexpr uint64_t kObjects = 48;
constexpr uint64_t kBlocks = kObjects * kObj / kBs;
constexpr uint32_t kReplication = 2;

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
    std::vector<CacheMember> members;
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
      auto n = cachenode::CacheNode::Create(cc, cache_pools_.back().get(), Clock::Real(),
                                            &registry_);
      ASSERT_TRUE(n.ok()) << n.status();
      nodes_.push_back(std::move(*n));
      members.push_back({id, 1.0, local::MakeLocalCacheClient(nodes_.back().get())});
    }
    VdiDefaults defaults;
    defaults.object_size = kObj;
    auto catalog = Catalog::Open(dir_ + "/catalog.txt", defaults);
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::move(*catalog);
    auto router = Router::Create(catalog_.get(), std::move(members), gateway_pool_.get());
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
  std::unique_ptr<Router> router_;
  std::shared_ptr<BlockDevice> dev_;
  std::unique_ptr<DataRebalancer> rebalancer_;
  // Pools of further rebalancers (another coordinator's); they outlive rebalancer_ (TearDown).
  std::vector<std::unique_ptr<datanode::DataNodePool>> extra_pools_;
  std::vector<std::string> expected_;
};

TEST_F(DataRebalancerTest, JoiningDataNodeGetsItsReplicasWhileWritesGoOn) {
  for (uint64_t b = 0; b < kBlocks; ++b) WriteBlock(b, 0);
  ASSERT_TRUE(router_->Flush("", nullptr).ok());
  ASSERT_TRUE(router_->SetMode("v", v1::WRITETHROUGH).ok());

  DataRebalancer::Options o;
  o.state_path = dir_ + "/data_ring";
  o.scan_page = 16;  // many pages: writes interleave with the scan
  o.retry_interval = absl::Milliseconds(50);
  rebalancer_ = DataRebalancer::Start(router_.get(), gateway_pool_.get(), o);
  ASSERT_TRUE(rebalancer_->WaitIdle(absl::Seconds(30)));
  EXPECT_EQ(rebalancer_->Status().data_epoch(), 0u) << "nothing to move yet";

  // A writer rewrites and trims blocks while data node 4 joins.
  std::atomic<bool> stop{false};
  std::atomic<int> rounds{0};
  std::thread writer([&] {
    std::mt19937_64 rng(42);
    for (int round = 1; !stop.load() || round <= 200; ++round) {
      const uint64_t b = rng() % kBlocks;
      if (round % 5 == 0) {
        ASSERT_TRUE(dev_->Trim(b * kBs, kBs).ok());
        expected_[b].assign(kBs, '\0');
      } else {
        WriteBlock(b, round);
      }
      rounds.store(round);
    }
  });
  rebalancer_->Add({dns_->endpoints()[3]});
  ASSERT_TRUE(rebalancer_->WaitIdle(absl::Seconds(120)));
  stop.store(true);
  writer.join();

  const v1::DataRebalance st = rebalancer_->Status();
  EXPECT_EQ(st.state(), "idle");
  EXPECT_EQ(st.data_epoch(), 2u) << "preparing (both rings), then switched";
  EXPECT_EQ(st.members_size(), 4);
  EXPECT_GT(st.blocks_copied(), 0u);
  EXPECT_GT(st.blocks_deleted(), 0u);
  EXPECT_GE(st.blocks_scanned(), kBlocks * kReplication / 2);
  for (const auto& p : cache_pools_) {
    EXPECT_EQ(p->ring().epoch, 2u);
    EXPECT_EQ(p->ring().members.size(), 4u);
    EXPECT_TRUE(p->ring().target.empty());
  }
  EXPECT_GE(rounds.load(), 200);

  EXPECT_EQ(WrongBlocks(), 0) << "every block reads back as last written, from the new homes";

  // Each block (or tombstone) is stored exactly on its homes of the new ring.
  auto ring = datanode::BuildDataRing(dns_->endpoints());
  ASSERT_TRUE(ring.ok());
  std::map<std::pair<uint64_t, uint32_t>, int> copies;
  for (int i = 0; i < 4; ++i) {
    const uint32_t id = dns_->endpoints()[i].id;
    datanode::ScannedBlock from, next;
    bool done = false;
    auto all = dns_->store(i)->ScanBlocks(0, 0, 0, 100000, false, &next, &done);
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_TRUE(done);
    for (const auto& b : *all) {
      auto homes = ring->Owners({b.vdi_id, b.object_index}, kReplication);
      ASSERT_TRUE(homes.ok());
      EXPECT_NE(std::find(homes->begin(), homes->end(), id), homes->end())
          << "data node " << id << " keeps object " << b.object_index << " it no longer homes";
      if (!b.trimmed) ++copies[{b.object_index, b.block_index}];
    }
    if (i == 3) {
      EXPECT_GT(all->size(), 0u) << "the new node holds replicas";
    }
  }
  for (const auto& [key, n] : copies) {
    EXPECT_EQ(n, static_cast<int>(kReplication)) << "object " << key.first << " block "
                                                 << key.second;
  }

  // The ring survives a restart of the gateway's state: a new pool from the saved file.
  auto saved = datanode::LoadDataRing(dir_ + "/data_ring");
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_TRUE(saved->has_value());
  EXPECT_EQ((*saved)->epoch, 2u);
  EXPECT_EQ((*saved)->members.size(), 4u);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/data_ring.purge"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/ssd1.datanodes"));
}

TEST_F(DataRebalancerTest, CopyNeverOverwritesWhatArrivedFirst) {
  for (uint64_t b = 0; b < kBlocks; ++b) WriteBlock(b, 0);
  ASSERT_TRUE(router_->SetMode("v", v1::WRITETHROUGH).ok());  // destages what is dirty
  DataRebalancer::Options o;
  o.scan_page = 8;
  o.retry_interval = absl::Milliseconds(50);
  // Between the scan of a page and the copy of its blocks, a client rewrites or trims every
  // scanned block: the copies of the scanned (older) data must not land over them.
  int round = 1;
  o.after_scan_for_test = [&](const std::vector<v1::ScannedBlock>& page) {
    for (const auto& sb : page) {
      const uint64_t b = sb.object_index() * (kObj / kBs) + sb.block_index();
      if (++round % 3 == 0) {
        ASSERT_TRUE(dev_->Trim(b * kBs, kBs).ok());
        expected_[b].assign(kBs, '\0');
      } else {
        WriteBlock(b, round);
      }
    }
  };
  rebalancer_ = DataRebalancer::Start(router_.get(), gateway_pool_.get(), o);
  rebalancer_->Add({dns_->endpoints()[3]});
  ASSERT_TRUE(rebalancer_->WaitIdle(absl::Seconds(120)));
  EXPECT_GT(round, static_cast<int>(kBlocks)) << "every block was rewritten during the copy";
  EXPECT_EQ(rebalancer_->Status().members_size(), 4);
  EXPECT_EQ(WrongBlocks(), 0);
}

TEST_F(DataRebalancerTest, PurgeLeftByAnEndedTermIsFinishedByTheNext) {
  for (uint64_t b = 0; b < kBlocks; ++b) WriteBlock(b, 0);
  ASSERT_TRUE(router_->SetMode("v", v1::WRITETHROUGH).ok());  // destages what is dirty
  // The first coordinator copies and switches, but its term ends as it saves the switched ring
  // (the guarded write is refused, gateway/etcd_state.h); the purge mark it set stays.
  bool mark = false;
  std::atomic<bool> refused{false};
  DataRebalancer::Options o;
  o.scan_page = 16;
  o.retry_interval = absl::Hours(1);  // no retry before it is stopped
  o.save_purge = [&mark](bool pending) {
    mark = pending;
    return absl::OkStatus();
  };
  o.save_ring = [&refused](const datanode::DataRing& ring) {
    if (ring.members.size() < 4 || !ring.target.empty()) return absl::OkStatus();
    refused.store(true);
    return absl::FailedPreconditionError("not the coordinator any more");
  };
  rebalancer_ = DataRebalancer::Start(router_.get(), gateway_pool_.get(), o);
  rebalancer_->Add({dns_->endpoints()[3]});
  for (int i = 0; i < 1200 && !refused.load(); ++i) absl::SleepFor(absl::Milliseconds(100));
  ASSERT_TRUE(refused.load()) << "the first term never reached the switch";
  rebalancer_.reset();
  ASSERT_TRUE(mark) << "the purge mark is set before the switch";
  EXPECT_GT(StoredOffHome(), 0) << "replicas on former homes wait for the purge";

  // The next coordinator (another gateway: no local marker) finds the mark and purges.
  DataRebalancer::Options next;
  next.scan_page = 16;
  next.retry_interval = absl::Milliseconds(50);
  next.purge_pending = mark;
  next.save_purge = o.save_purge;
  rebalancer_ = DataRebalancer::Start(router_.get(), gateway_pool_.get(), next);
  rebalancer_->Add({dns_->endpoints()[3]});
  ASSERT_TRUE(rebalancer_->WaitIdle(absl::Seconds(120)));
  EXPECT_FALSE(mark) << "the mark is cleared after the purge";
  EXPECT_GT(rebalancer_->Status().blocks_deleted(), 0u);
  EXPECT_EQ(StoredOffHome(), 0);
  EXPECT_EQ(WrongBlocks(), 0);
}

// Polls the rebalancer until `done(status)` holds (60 s at most).
bool WaitFor(const DataRebalancer& r, const std::function<bool(const v1::DataRebalance&)>& done) {
  for (int i = 0; i < 600; ++i) {
    if (done(r.Status())) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

TEST_F(DataRebalancerTest, DataNodeDownPastTheGracePeriodIsTakenOutAndItsReplicasMadeAgain) {
  for (uint64_t b = 0; b < kBlocks; ++b) WriteBlock(b, 0);
  ASSERT_TRUE(router_->Flush("", nullptr).ok());
  dns_->StopForTest(0);  // data node 1 never comes back

  DataRebalancer::Options o;
  o.scan_page = 16;
  o.retry_interval = absl::Milliseconds(50);
  o.heal_interval = absl::Milliseconds(100);
  o.down_out = absl::Seconds(1);
  rebalancer_ = DataRebalancer::Start(router_.get(), gateway_pool_.get(), o);
  rebalancer_->Add(initial_.nodes);
  ASSERT_TRUE(WaitFor(*rebalancer_, [](const v1::DataRebalance& st) {
    return st.state() == "idle" && st.out_size() == 1;
  })) << rebalancer_->Status().ShortDebugString();
  const v1::DataRebalance st = rebalancer_->Status();
  EXPECT_EQ(st.out(0), 1u);
  EXPECT_EQ(st.members_size(), 2) << "data nodes 2 and 3 are left";
  EXPECT_GT(st.blocks_copied(), 0u) << "node 1's replicas were made again";
  for (const auto& p : cache_pools_) EXPECT_TRUE(p->ring().IsOut(1));
  // A cache node that lost its copy of the ring (a wiped state directory: the cluster file's
  // ring, epoch 0) finds the current one on the data nodes before it replays anything.
  auto fresh = datanode::DataNodePool::Create(initial_, nullptr);
  ASSERT_TRUE(fresh.ok());
  auto adopted = (*fresh)->AdoptNewestKeptRing();
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_TRUE(*adopted);
  EXPECT_EQ((*fresh)->ring().epoch, gateway_pool_->ring().epoch);
  EXPECT_TRUE((*fresh)->ring().IsOut(1));

  // Writes and destage go on without data node 1.
  for (uint64_t b = 0; b < kBlocks; b += 3) WriteBlock(b, 1);
  ASSERT_TRUE(router_->Flush("", nullptr).ok()) << "destage no longer waits for data node 1";
  // Node 1 stays out: it is neither written to nor read.
  auto again = rebalancer_->Action(1, "out");
  ASSERT_TRUE(again.ok());
  EXPECT_THAT(*again, ::testing::HasSubstr("out already"));

  // Every block has its two copies on 2 and 3 now: losing node 2 too loses nothing.
  dns_->StopForTest(1);
  for (auto& n : nodes_) ASSERT_TRUE(n->DropBlocks(true, nullptr).ok());
  std::string buf(kBs, '\0');
  int wrong = 0;
  for (uint64_t b = 0; b < kBlocks; ++b) {
    ASSERT_TRUE(dev_->Read(b * kBs, kBs, buf.data()).ok()) << b;
    if (buf != expected_[b]) ++wrong;
  }
  EXPECT_EQ(wrong, 0);
}

TEST_F(DataRebalancerTest, DecommissionMovesEverythingOffNeverBelowNCopies) {
  for (uint64_t b = 0; b < kBlocks; ++b) WriteBlock(b, 0);
  ASSERT_TRUE(router_->SetMode("v", v1::WRITETHROUGH).ok());
  ASSERT_NO_FATAL_FAILURE(StartOverInitialNodes());

  EXPECT_EQ(rebalancer_->Action(9, "out").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(rebalancer_->Action(3, "in").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(rebalancer_->Action(3, "sideways").status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(rebalancer_->Action(3, "decommission").ok());
  ASSERT_TRUE(WaitFor(*rebalancer_, [](const v1::DataRebalance& st) {
    return st.state() == "idle" && st.out_size() == 1;
  })) << rebalancer_->Status().ShortDebugString();
  EXPECT_EQ(rebalancer_->Status().members_size(), 2);
  // Two data nodes left for replication 2: the next one is refused, never below N copies.
  auto refused = rebalancer_->Action(2, "decommission");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("would leave 1 data nodes"));
  // The decommissioned node serves nothing: stopping it loses nothing.
  dns_->StopForTest(2);
  EXPECT_EQ(WrongBlocks(), 0);
}

TEST(DataActionsTest, EncodeDecodeRoundTripAndRefuseGarbage) {
  absl::flat_hash_set<uint32_t> out{3, 1}, in{2}, decommission{7};
  const std::string text = EncodeDataActions(out, in, decommission);
  EXPECT_EQ(text, "out 1\nout 3\nin 2\ndecommission 7\n");
  absl::flat_hash_set<uint32_t> o, i, d;
  ASSERT_TRUE(DecodeDataActions(text, &o, &i, &d).ok());
  EXPECT_EQ(o, out);
  EXPECT_EQ(i, in);
  EXPECT_EQ(d, decommission);
  ASSERT_TRUE(DecodeDataActions("", &o, &i, &d).ok());
  EXPECT_TRUE(o.empty() && i.empty() && d.empty());
  EXPECT_FALSE(DecodeDataActions("sideways 2\n", &o, &i, &d).ok());
  EXPECT_FALSE(DecodeDataActions("out two\n", &o, &i, &d).ok());
}

// `datanode out` accepted by a coordinator whose term ends before the ring without the node
// reaches the cache nodes: the next coordinator (cluster mode: another gateway, the actions in
// etcd; static mode: the gateway restarted, the actions file) takes the node out all the same.
TEST_F(DataRebalancerTest, ActionAcceptedByAnEndedTermIsCarriedOutByTheNext) {
  for (uint64_t b = 0; b < kBlocks; ++b) WriteBlock(b, 0);
  ASSERT_TRUE(router_->SetMode("v", v1::WRITETHROUGH).ok());
  for (const bool etcd : {true, false}) {
    SCOPED_TRACE(etcd ? "cluster mode" : "static mode");
    std::string saved;  // what etcd holds
    DataRebalancer::Options o;
    o.scan_page = 16;
    o.retry_interval = absl::Milliseconds(50);
    o.heal_interval = absl::Milliseconds(100);
    if (etcd) {
      o.save_actions = [&saved](const std::string& actions) {
        saved = actions;
        return absl::OkStatus();
      };
    } else {
      o.state_path = dir_ + "/data_ring";
    }
    // Each term on its own pool, from the ring the cache nodes have (what etcd holds).
    auto ended_pool = datanode::DataNodePool::Create(cache_pools_[0]->ring(), &registry_);
    ASSERT_TRUE(ended_pool.ok());
    extra_pools_.push_back(std::move(*ended_pool));
    // The ring without node 2 cannot be saved: the term ended.
    std::atomic<bool> refused{false};
    DataRebalancer::Options ended = o;
    ended.retry_interval = absl::Hours(1);
    ended.save_ring = [&refused](const datanode::DataRing& ring) {
      if (ring.out.empty()) return absl::OkStatus();
      refused.store(true);
      return absl::FailedPreconditionError("not the coordinator any more");
    };
    rebalancer_ = DataRebalancer::Start(router_.get(), extra_pools_.back().get(), ended);
    rebalancer_->Add(initial_.nodes);
    ASSERT_TRUE(rebalancer_->WaitIdle(absl::Seconds(30)));
    ASSERT_TRUE(rebalancer_->Action(2, "out").ok());
    for (int i = 0; i < 300 && !refused.load(); ++i) absl::SleepFor(absl::Milliseconds(100));
    ASSERT_TRUE(refused.load()) << "the ended term never tried to take node 2 out";
    rebalancer_.reset();
    if (etcd) {
      EXPECT_EQ(saved, "out 2\n");
    } else {
      // As after a crash before the ring was saved.
      std::filesystem::remove(dir_ + "/data_ring");
    }
    ASSERT_FALSE(cache_pools_[0]->ring().IsOut(2)) << "no cache node saw node 2 go out";

    auto next_pool = datanode::DataNodePool::Create(cache_pools_[0]->ring(), &registry_);
    ASSERT_TRUE(next_pool.ok());
    extra_pools_.push_back(std::move(*next_pool));
    DataRebalancer::Options next = o;
    next.actions = saved;
    rebalancer_ = DataRebalancer::Start(router_.get(), extra_pools_.back().get(), next);
    rebalancer_->Add(initial_.nodes);
    ASSERT_TRUE(WaitFor(*rebalancer_, [](const v1::DataRebalance& st) {
      return st.state() == "idle" && st.out_size() == 1;
    })) << rebalancer_->Status().ShortDebugString();
    for (const auto& p : cache_pools_) EXPECT_TRUE(p->ring().IsOut(2));
    // Carried out, the action is no longer kept: a later `in` is not undone by it.
    ASSERT_TRUE(WaitFor(*rebalancer_, [&](const v1::DataRebalance&) {
      return etcd ? saved.empty() : std::filesystem::file_size(dir_ + "/data_ring.actions") == 0;
    }));
    ASSERT_TRUE(rebalancer_->Action(2, "in").ok());
    ASSERT_TRUE(WaitFor(*rebalancer_, [](const v1::DataRebalance& st) {
      return st.state() == "idle" && st.out_size() == 0 && st.members_size() == 3;
    })) << rebalancer_->Status().ShortDebugString();
    rebalancer_.reset();
  }
  EXPECT_EQ(WrongBlocks(), 0);
}

TEST_F(DataRebalancerTest, ActionThatCannotBeRecordedIsNotAsked) {
  DataRebalancer::Options o;
  o.retry_interval = absl::Milliseconds(50);
  o.save_actions = [](const std::string&) { return absl::UnavailableError("etcd is away"); };
  rebalancer_ = DataRebalancer::Start(router_.get(), gateway_pool_.get(), o);
  rebalancer_->Add(initial_.nodes);
  ASSERT_TRUE(rebalancer_->WaitIdle(absl::Seconds(30)));
  auto refused = rebalancer_->Action(2, "out");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("not carried out"));
  absl::SleepFor(absl::Milliseconds(300));  // passes of the loop: nothing goes out
  EXPECT_FALSE(gateway_pool_->ring().IsOut(2));
  EXPECT_EQ(rebalancer_->Status().out_size(), 0);
}

TEST_F(DataRebalancerTest, NodePutBackInJoinsAgainWithItsStaleStoreCleared) {
  for (uint64_t b = 0; b < kBlocks; ++b) WriteBlock(b, 0);
  ASSERT_TRUE(router_->SetMode("v", v1::WRITETHROUGH).ok());
  ASSERT_NO_FATAL_FAILURE(StartOverInitialNodes());
  // Node 2 goes out while it still answers; the blocks written meanwhile miss it.
  ASSERT_TRUE(rebalancer_->Action(2, "out").ok());
  ASSERT_TRUE(WaitFor(*rebalancer_, [](const v1::DataRebalance& st) {
    return st.state() == "idle" && st.out_size() == 1 && st.members_size() == 2;
  })) << rebalancer_->Status().ShortDebugString();
  for (uint64_t b = 0; b < kBlocks; b += 2) WriteBlock(b, 1);
  const uint64_t stale = dns_->store(1)->Stats().blocks;
  EXPECT_GT(stale, 0u) << "node 2 keeps its old copies while out";

  ASSERT_TRUE(rebalancer_->Action(2, "in").ok());
  ASSERT_TRUE(WaitFor(*rebalancer_, [](const v1::DataRebalance& st) {
    return st.state() == "idle" && st.out_size() == 0 && st.members_size() == 3;
  })) << rebalancer_->Status().ShortDebugString();
  // Back in, node 2 holds exactly what it homes, all of it current (a stale copy kept would
  // have made the only-if-absent copy skip the new data).
  EXPECT_EQ(WrongBlocks(), 0);
  const uint32_t vdi = catalog_->List().at(0).geometry.vdi_id();
  auto ring = datanode::BuildDataRing(initial_.nodes);
  ASSERT_TRUE(ring.ok());
  int wrong = 0, read = 0;
  for (uint64_t b = 0; b < kBlocks; ++b) {
    const uint64_t object = b / (kObj / kBs);
    auto homes = ring->Owners({vdi, object}, kReplication);
    ASSERT_TRUE(homes.ok());
    if (std::find(homes->begin(), homes->end(), 2u) == homes->end()) continue;
    ++read;
    auto r = dns_->store(1)->ReadBlocks(vdi, object, b % (kObj / kBs), 1);
    ASSERT_TRUE(r.ok()) << r.status();
    if (r->data != expected_[b]) ++wrong;
  }
  EXPECT_GT(read, 0);
  EXPECT_EQ(wrong, 0) << "node 2's copies are the current ones";
}

// Rotten bytes (docs/durability.md): the data nodes' scrub finds damaged block copies and log
// record copies; the coordinator rewrites the blocks from good replicas and has the cache nodes
// log the damaged records' blocks again.
TEST_F(DataRebalancerTest, ScrubRepairsDamagedBlocksAndRelogsDamagedLogRecords) {
  for (uint64_t b = 0; b < kBlocks; ++b) WriteBlock(b, 0);
  ASSERT_TRUE(router_->Flush("", nullptr).ok());
  for (uint64_t b = 0; b < kBlocks; b += 2) WriteBlock(b, 1);  // dirty: one log copy each (N=2)
  const uint32_t vdi = catalog_->List().at(0).geometry.vdi_id();

  // Five stored blocks of data node 1 and five log records (wherever they are) rot.
  std::vector<datanode::ScrubFinding> rotten;
  {
    datanode::ScannedBlock next;
    bool done = false;
    auto all = dns_->store(0)->ScanBlocks(0, 0, 0, 100000, false, &next, &done);
    ASSERT_TRUE(all.ok());
    ASSERT_GE(all->size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      const auto& b = (*all)[i * all->size() / 5];
      ASSERT_TRUE(dns_->store(0)->DamageBlockForTest(b.vdi_id, b.object_index, b.block_index).ok());
    }
  }
  int damaged_records = 0;
  for (int d = 0; d < 3 && damaged_records < 5; ++d) {
    for (uint32_t writer : {1u, 2u}) {
      uint64_t next = 0;
      bool done = false;
      auto log = dns_->store(d)->LogScan(writer, 0, 1000, false, &next, &done);
      ASSERT_TRUE(log.ok());
      for (size_t i = 0; i < log->size() && damaged_records < 5; i += 7) {
        ASSERT_TRUE(dns_->store(d)->DamageLogRecordForTest(writer, (*log)[i].sequence).ok());
        datanode::ScrubFinding f;
        f.log = true;
        f.cache_node_id = writer;
        f.sequence = (*log)[i].sequence;
        rotten.push_back(f);
        ++damaged_records;
      }
    }
  }
  ASSERT_EQ(damaged_records, 5);

  DataRebalancer::Options o;
  o.retry_interval = absl::Milliseconds(50);
  o.heal_interval = absl::Milliseconds(100);
  o.scrub_poll = absl::Milliseconds(100);
  rebalancer_ = DataRebalancer::Start(router_.get(), gateway_pool_.get(), o);
  ASSERT_TRUE(rebalancer_->WaitIdle(absl::Seconds(30)));
  rebalancer_->Scrub(/*start=*/true);
  v1::ClusterScrubStatus st;
  for (int i = 0; i < 300; ++i) {
    st = rebalancer_->LastScrub();
    bool quiet = st.nodes_size() == 3;
    for (const auto& n : st.nodes()) quiet = quiet && n.passes() >= 1 && n.open_size() == 0;
    if (quiet) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(st.blocks_repaired(), 5u) << st.ShortDebugString();
  EXPECT_EQ(st.log_records_relogged(), 5u);
  EXPECT_EQ(st.unrepairable_blocks(), 0u);
  uint64_t found_blocks = 0, found_records = 0;
  for (const auto& n : st.nodes()) {
    EXPECT_EQ(n.open_size(), 0) << "data node " << n.node_id();
    found_blocks += n.damaged_blocks_found();
    found_records += n.damaged_log_records_found();
  }
  EXPECT_EQ(found_blocks, 5u);
  EXPECT_EQ(found_records, 5u);
  // The damaged records are gone: their blocks were logged again under new records.
  for (const auto& f : rotten) {
    for (int d = 0; d < 3; ++d) EXPECT_FALSE(dns_->store(d)->StillDamaged(f)) << f.sequence;
  }
  // Every dirty block has a good log copy again: the cache nodes' SSDs lost, a replay from the
  // data nodes alone brings every block back.
  for (uint32_t id = 1; id <= 2; ++id) {
    auto replay = datanode::ReplayCacheNodeLog(gateway_pool_.get(), id, [&](uint32_t v) {
      return v == vdi ? kReplication : 0u;
    });
    ASSERT_TRUE(replay.ok()) << replay.status();
    EXPECT_EQ(replay->records_lost, 0u) << "cache node " << id;
  }
  EXPECT_EQ(WrongBlocks(), 0);
}

// The pace of the copies follows the clients (gateway/copy_pacer.h): the data nodes count the
// requests the cache nodes send them, never the rebalancer's own scans and copies, or a copy
// would always find the nodes busy.
TEST_F(DataRebalancerTest, DataNodesCountClientRequestsNotCopies) {
  for (uint64_t b = 0; b < 8; ++b) WriteBlock(b, 0);
  ASSERT_TRUE(router_->Flush("", nullptr).ok());
  const std::optional<uint64_t> before = gateway_pool_->ClientOps();
  ASSERT_TRUE(before.has_value());
  std::optional<v1::ScannedBlock> found;
  for (uint32_t node : initial_.members) {
    auto page = gateway_pool_->ScanBlocks(node, ring::ObjectKey{0, 0}, 0, 64, true);
    ASSERT_TRUE(page.ok()) << page.status();
    if (!page->blocks.empty() && !found) found = page->blocks[0];
  }
  ASSERT_TRUE(found.has_value()) << "no data node holds a block";
  datanode::HomeStamp stamp;
  ASSERT_TRUE(gateway_pool_
                  ->CopyBlocks(initial_.members[1], found->vdi_id(), found->object_index(),
                               found->block_index(), found->data(), stamp)
                  .ok());
  EXPECT_EQ(gateway_pool_->ClientOps(), before) << "a scan and a copy are no client requests";
  for (auto& n : nodes_) ASSERT_TRUE(n->DropBlocks(true, nullptr).ok());
  std::string buf(kBs, '\0');
  ASSERT_TRUE(dev_->Read(0, kBs, buf.data()).ok());  // a cache miss: read from a data node
  const std::optional<uint64_t> after = gateway_pool_->ClientOps();
  ASSERT_TRUE(after.has_value());
  EXPECT_GT(*after, *before);
}

TEST_F(DataRebalancerTest, OlderRingIsRefused) {
  datanode::DataRing next = initial_;
  next.epoch = 5;
  ASSERT_TRUE(cache_pools_[0]->SetRing(next).ok());
  next.epoch = 4;
  EXPECT_EQ(cache_pools_[0]->SetRing(next).code(), absl::StatusCode::kFailedPrecondition);
  next.epoch = 5;
  EXPECT_TRUE(cache_pools_[0]->SetRing(next).ok()) << "the same epoch again changes nothing";
  datanode::DataRing bad = initial_;
  bad.epoch = 6;
  bad.members.push_back(99);
  EXPECT_EQ(cache_pools_[0]->SetRing(bad).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringcache::gateway
