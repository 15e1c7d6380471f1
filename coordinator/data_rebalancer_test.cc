// Data rebalancing in one process: real data nodes (embedded gRPC servers), real cache nodes each
// with its own data node pool (as separate processes have), the router and the rebalancer. A data
// node joins while a writer keeps writing and trimming through the router in write-through mode
// (so every write goes home during the move); afterwards every block reads back as last written,
// from the data nodes (the cache dropped), and each block is stored exactly on its new homes.
#include "coordinator/testing/rebalancer_fixture.h"

namespace ringcache::coordinator {
namespace {

using namespace ringcache::coordinator::testing;  // NOLINT: the fixture and its constants

TEST_F(DataRebalancerTest, JoiningDataNodeGetsItsReplicasWhileWritesGoOn) {
  ASSERT_NO_FATAL_FAILURE(StartIdleWriteThrough());
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
    EXPECT_EQ(n, static_cast<int>(kReplication))
        << "object " << key.first << " block " << key.second;
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

// A Publish that fails part way (a joining data node refused a connection for a moment after its
// restart) leaves the target ring in the gateway's pool but not in the cache nodes. The next pass
// goes straight to the copy, which must publish again first: otherwise the cache nodes write to
// the old homes only, what they write after the copy's scan never reaches the new node, and the
// purge after the switch deletes the only copies (seen in the disk nemeses: 118 blocks lost).
TEST_F(DataRebalancerTest, CopyStartsOnlyOnceEveryCacheNodeWritesToTheTarget) {
  ASSERT_NO_FATAL_FAILURE(StartIdleWriteThrough());
  // What the failed Publish left: the prepared ring (members, and joining node 4 in the target)
  // in the gateway's pool only.
  datanode::DataRing prep = gateway_pool_->ring();
  prep.nodes.push_back(dns_->endpoints()[3]);
  prep.target = prep.members;
  prep.target.push_back(dns_->endpoints()[3].id);
  prep.epoch = 1;
  ASSERT_TRUE(gateway_pool_->SetRing(prep).ok());
  for (const auto& p : cache_pools_) ASSERT_TRUE(p->ring().target.empty());

  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::mt19937_64 rng(7);
    for (int round = 1; !stop.load(); ++round) WriteBlock(rng() % kBlocks, round);
  });
  rebalancer_->Add({dns_->endpoints()[3]});  // wakes the rebalancer: its next pass copies
  // Once the copy has scanned anything, every cache node must already write to the target.
  bool checked = false;
  for (int i = 0; i < 30000 && !checked; ++i) {
    const v1::DataRebalance st = rebalancer_->Status();
    if (st.state() == "copying" && st.blocks_scanned() > 0) {
      for (const auto& p : cache_pools_) {
        EXPECT_FALSE(p->ring().target.empty())
            << "a cache node is still on ring epoch " << p->ring().epoch << " while the copy runs";
      }
      checked = true;
    } else if (st.state() == "idle" && st.data_epoch() > 1) {
      break;
    }
    absl::SleepFor(absl::Microseconds(200));
  }
  EXPECT_TRUE(checked) << "the copy was never seen running";
  ASSERT_TRUE(rebalancer_->WaitIdle(absl::Seconds(120)));
  stop.store(true);
  writer.join();
  EXPECT_EQ(rebalancer_->Status().members_size(), 4);
  EXPECT_EQ(WrongBlocks(), 0) << "every block reads back as last written";
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
  // (the guarded write is refused, coordinator/etcd_state.h); the purge mark it set stays.
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
TEST_F(DataRebalancerTest, DataNodeDownPastTheGracePeriodIsTakenOutAndItsReplicasMadeAgain) {
  for (uint64_t b = 0; b < kBlocks; ++b) WriteBlock(b, 0);
  ASSERT_TRUE(router_->Flush("", nullptr).ok());
  dns_->StopForTest(0);  // data node 1 never comes back

  // The default down-out interval of ten minutes, on a simulated clock moved by half a minute
  // every 20 ms: the node goes out once ten simulated minutes passed since it was seen down.
  SimulatedClock& clock = sim_clock_;
  DataRebalancer::Options o;
  o.scan_page = 16;
  o.retry_interval = absl::Milliseconds(50);
  o.heal_interval = absl::Milliseconds(10);
  o.clock = &clock;
  ASSERT_EQ(o.down_out, absl::Minutes(10));
  rebalancer_ = DataRebalancer::Start(router_.get(), gateway_pool_.get(), o);
  rebalancer_->Add(initial_.nodes);
  const absl::Time stopped = clock.Now();
  absl::Time out_at = absl::InfinitePast();
  for (int i = 0; i < 3000 && out_at == absl::InfinitePast(); ++i) {
    absl::SleepFor(absl::Milliseconds(20));
    if (rebalancer_->Status().out_size() > 0) out_at = clock.Now();
    clock.Advance(absl::Seconds(30));
  }
  ASSERT_NE(out_at, absl::InfinitePast()) << rebalancer_->Status().ShortDebugString();
  EXPECT_GE(out_at - stopped, absl::Minutes(10)) << "taken out before the down-out interval";
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
  EXPECT_EQ(rebalancer_->Action(3, "sideways").status().code(), absl::StatusCode::kInvalidArgument);
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

}  // namespace
}  // namespace ringcache::coordinator
