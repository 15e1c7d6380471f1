// Data rebalancing in one process, continued (the fixture:
// coordinator/testing/rebalancer_fixture.h): operator actions recorded and carried out across
// terms, a node put back in, scrub repairs, what data nodes count as client requests, an older
// ring refused, and the log seals a wiped node takes from its peers.
#include "common/checksum.h"
#include "common/errors.h"
#include "coordinator/testing/rebalancer_fixture.h"

namespace ringcache::coordinator {
namespace {

using namespace ringcache::coordinator::testing;  // NOLINT: the fixture and its constants

TEST(DataActionsTest, EncodeDecodeRoundTripAndRefuseGarbage) {
  const DataActions asks{{3, 1}, {2}, {7}};
  const std::string text = EncodeDataActions(asks);
  EXPECT_EQ(text, "out 1\nout 3\nin 2\ndecommission 7\n");
  DataActions back;
  ASSERT_TRUE(DecodeDataActions(text, &back).ok());
  EXPECT_EQ(back, asks);
  DataActions none;
  ASSERT_TRUE(DecodeDataActions("", &none).ok());
  EXPECT_TRUE(none.empty());
  // Lines add to what is there.
  ASSERT_TRUE(DecodeDataActions("in 5\n", &back).ok());
  EXPECT_EQ(back.in, (absl::flat_hash_set<uint32_t>{2, 5}));
  EXPECT_FALSE(DecodeDataActions("sideways 2\n", &none).ok());
  EXPECT_FALSE(DecodeDataActions("out two\n", &none).ok());
}

// `datanode out` accepted by a coordinator whose term ends before the ring without the node
// reaches the cache nodes: the next coordinator (cluster mode: another gateway, the actions in
// etcd; static mode: the gateway restarted, the actions file) takes the node out all the same.
TEST_F(DataRebalancerTest, ActionAcceptedByAnEndedTermIsCarriedOutByTheNext) {
  for (uint64_t b = 0; b < kBlocks; ++b) WriteBlock(b, 0);
  ASSERT_TRUE(router_->SetMode("v", v1::WRITETHROUGH).ok());
  for (const bool etcd : {true, false}) {
    SCOPED_TRACE(etcd ? "cluster mode" : "static mode");
    DataActions saved;  // what etcd holds
    DataRebalancer::Options o;
    o.scan_page = 16;
    o.retry_interval = absl::Milliseconds(50);
    o.heal_interval = absl::Milliseconds(100);
    if (etcd) {
      o.save_actions = [&saved](const DataActions& actions) {
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
      EXPECT_EQ(EncodeDataActions(saved), "out 2\n");
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
  o.save_actions = [](const DataActions&) { return absl::UnavailableError("etcd is away"); };
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
    auto replay = datanode::ReplayCacheNodeLog(
        gateway_pool_.get(), id, [&](uint32_t v) { return v == vdi ? kReplication : 0u; });
    ASSERT_TRUE(replay.ok()) << replay.status();
    EXPECT_EQ(replay->records_lost, 0u) << "cache node " << id;
  }
  EXPECT_EQ(WrongBlocks(), 0);
}

// The pace of the copies follows the clients (coordinator/copy_pacer.h): the data nodes count the
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

// A data node back with an empty store takes its peers' log seals before it is given any VDI,
// and so before it takes any log record (LogAppend needs the VDI): a cache node cut off at an
// older ownership epoch cannot log a write there that its sealed peers refuse.
TEST_F(DataRebalancerTest, WipedDataNodeTakesItsPeersLogSealsBeforeAnyVdi) {
  ASSERT_NO_FATAL_FAILURE(StartOverInitialNodes());
  // Cache node 2's objects were taken from it at ring epoch 7.
  ASSERT_TRUE(gateway_pool_->SealLog(2, 7).ok());
  dns_->WipeForTest(0);
  auto v = catalog_->Find("v");
  ASSERT_TRUE(v.ok()) << v.status();
  const uint32_t vdi = v->geometry.vdi_id();
  bool known = false;
  for (int i = 0; i < 1200 && !known; ++i) {
    known = dns_->store(0)->GetVdi(vdi).ok();
    if (!known) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(known) << "the wiped node is given the VDI again";
  EXPECT_EQ(dns_->store(0)->LogSeal(2), 7u);
  EXPECT_EQ(dns_->store(0)->LogSeal(1), 0u) << "cache node 1 was never sealed";
  const std::string data(kBs, 'z');
  datanode::LogEntry old_epoch{2, 1'000'000, vdi, 0, 0, BlockChecksum(data), data, 6};
  auto refused = dns_->store(0)->LogAppend({old_epoch});
  EXPECT_TRUE(IsKind(refused.status(), ErrorKind::kLogSealed)) << refused.status();
  datanode::LogEntry current{2, 1'000'001, vdi, 0, 0, BlockChecksum(data), data, 7};
  EXPECT_TRUE(dns_->store(0)->LogAppend({current}).ok());
}

}  // namespace
}  // namespace ringcache::coordinator
