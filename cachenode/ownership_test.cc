// Ownership safety (docs/durability.md): one test per door through which a cache node that lost
// its objects could put old data over newer acknowledged data, and the sticky storage error.
//  - a node that destages after its log was replayed and another node wrote newer data;
//  - a quarantine that a restart forgets;
//  - the reclaimer destaging dirty evictions while the node is fenced;
//  - a destage reading a slot that DropBlocks released and a write reused;
//  - a failed fdatasync followed by an acknowledgement.
#include "cachenode/ownership.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include "datanode/client/log_replay.h"
#include "cachenode/testing/cache_node_harness.h"
#include "common/errors.h"
#include "common/file.h"
#include "gtest/gtest.h"

namespace ringcache::cachenode {
namespace {

constexpr uint32_t kBs = 4096;

class OwnershipTest : public testing::CacheNodeHarness {
 protected:
  // The home copy of block `block` of object `object` of VDI 1 (first data node holding it).
  std::string Home(uint64_t object, uint32_t block) {
    auto run = pool_->Read(1, object, block, 1, geometry_.replication(), kBs);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? run->data : "";
  }
  // Waits (bounded) until `cond` holds; returns whether it did.
  template <typename F>
  bool WaitFor(F cond, int seconds = 30) {
    for (int i = 0; i < seconds * 20; ++i) {
      if (cond()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return cond();
  }
  std::unique_ptr<CacheNode> SecondNode(uint32_t id) {
    CacheNodeConfig c = config_;
    c.node_id = id;
    c.ssd_path = dir_ + "/ssd" + std::to_string(id) + ".slots";
    auto n = CacheNode::Create(c, pool_.get(), Clock::Real(), &registry_);
    EXPECT_TRUE(n.ok()) << n.status();
    if (!n.ok()) return nullptr;
    EXPECT_TRUE((*n)->RegisterVdi(geometry_).ok());
    return *std::move(n);
  }
};

// A rotten log record copy (docs/durability.md): the replay takes the other copy of the same
// record; a record whose every copy is damaged is reported and the replay goes on (it used to
// stop the node's replay for good).
TEST_F(OwnershipTest, ReplaySkipsADamagedCopyForAGoodOneAndGoesOn) {
  SetUpCluster(4, 3, 1);  // N = 3: two log copies of every write
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::string a(kBs, 'a'), b(kBs, 'b');
  ASSERT_TRUE(node_->Write(1, 5, 0, kBs, a.data()).ok());
  ASSERT_TRUE(node_->Write(1, 6, 0, kBs, b.data()).ok());
  // The records' copies, by data node index.
  std::vector<std::pair<int, uint64_t>> copies;  // (store index, sequence)
  for (int i = 0; i < 4; ++i) {
    uint64_t next = 0;
    bool done = false;
    auto recs = dns_->store(i)->LogScan(1, 0, 1000, false, &next, &done);
    ASSERT_TRUE(recs.ok());
    for (const auto& r : *recs) copies.emplace_back(i, r.sequence);
  }
  ASSERT_EQ(copies.size(), 4u);
  std::sort(copies.begin(), copies.end(),
            [](const auto& x, const auto& y) { return x.second < y.second; });
  // Object 5's record: one copy damaged. Object 6's: both.
  ASSERT_EQ(copies[0].second, copies[1].second);
  ASSERT_TRUE(dns_->store(copies[0].first)->DamageLogRecordForTest(1, copies[0].second).ok());
  ASSERT_TRUE(dns_->store(copies[2].first)->DamageLogRecordForTest(1, copies[2].second).ok());
  ASSERT_TRUE(dns_->store(copies[3].first)->DamageLogRecordForTest(1, copies[3].second).ok());
  node_.reset();  // the node is lost with its dirty blocks
  auto replay = datanode::ReplayCacheNodeLog(pool_.get(), 1, [](uint32_t) { return 3u; });
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_EQ(replay->damaged_copies, 1u);
  EXPECT_EQ(replay->records_lost, 1u);
  EXPECT_EQ(Home(5, 0), a);
}

// The five-step scenario in one process: node 1 wrote 'a' at epoch 1 and was removed (its log
// replayed); node 2 owns the object at epoch 2, writes 'b' and destages it; node 1 comes back
// with its old dirty block and destages. The data nodes refuse the older version and node 1
// discards its obsolete copy: the newest acknowledged write survives.
TEST_F(OwnershipTest, ReturningNodeCannotOverwriteNewerData) {
  ASSERT_NO_FATAL_FAILURE(SetUpCluster(3, 2, 1));
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::string a(kBs, 'a'), b(kBs, 'b');
  node_->ObserveEpoch(1);
  ASSERT_TRUE(node_->Write(1, 5, 0, kBs, a.data()).ok());
  auto replay = datanode::ReplayCacheNodeLog(pool_.get(), 1, [](uint32_t) { return 2u; });
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_EQ(Home(5, 0), a);

  auto node2 = SecondNode(2);
  ASSERT_NE(node2, nullptr);
  node2->ObserveEpoch(2);
  ASSERT_TRUE(node2->Write(1, 5, 0, kBs, b.data()).ok());
  ASSERT_TRUE(node2->Flush(0).ok());
  EXPECT_EQ(Home(5, 0), b);

  // Node 1 (its quarantine lost, as on today's restart path) destages its old block.
  ASSERT_EQ(node_->dirty_blocks(), 1u);
  ASSERT_TRUE(node_->Flush(0).ok());
  EXPECT_EQ(Home(5, 0), b) << "an older owner's destage overwrote newer acknowledged data";
  EXPECT_EQ(node_->dirty_blocks(), 0u);
  EXPECT_EQ(registry_
                .GetCounter("ringcache_cachenode_obsolete_blocks_discarded_total", "",
                            {{"node", "1"}})
                ->Value(),
            1.0);
  std::string got(kBs, '\0');
  ASSERT_TRUE(node_->Read(1, 5, 0, kBs, got.data()).ok());
  EXPECT_EQ(got, b) << "node 1 still serves its obsolete copy";
  // A leftover log record of node 1 replayed again changes nothing either.
  ASSERT_TRUE(datanode::ReplayCacheNodeLog(pool_.get(), 1, [](uint32_t) { return 2u; }).ok());
  EXPECT_EQ(Home(5, 0), b);
  node2.reset();
}

TEST_F(OwnershipTest, QuarantineSurvivesRestartAndGatesEverything) {
  ASSERT_NO_FATAL_FAILURE(SetUpCluster(3, 2, 1));
  config_.idle_window_ms = 100;  // idle at once: destage runs unless gated
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::string a(kBs, 'a');
  // Quarantined first (as a lost lease does), then the block is dirty: nothing may go home.
  ASSERT_TRUE(node_->Write(1, 2, 0, kBs, a.data()).ok());
  ASSERT_TRUE(node_->ownership()->Quarantine("test: lease lost").ok());
  EXPECT_TRUE(IsKind(node_->CheckOwner(), ErrorKind::kFenced));
  Start();  // restart (the file <ssd>.owner keeps the quarantine)
  EXPECT_TRUE(node_->ownership()->quarantined());
  EXPECT_TRUE(IsKind(node_->CheckOwner(), ErrorKind::kFenced));
  EXPECT_TRUE(IsKind(node_->Write(1, 2, 0, kBs, a.data()), ErrorKind::kFenced));
  EXPECT_TRUE(IsKind(node_->Trim(1, 2, 0, kBs, false), ErrorKind::kFenced));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // idle destage would run
  EXPECT_EQ(node_->dirty_blocks(), 1u) << "a quarantined node destaged after a restart";
  EXPECT_EQ(Home(2, 0), std::string(kBs, '\0'));
  // Re-admitted at the current epoch: serves and destages again.
  ASSERT_TRUE(node_->Readmit(7).ok());
  EXPECT_EQ(node_->epoch(), 7u);
  EXPECT_TRUE(node_->CheckOwner().ok());
  EXPECT_TRUE(WaitFor([&] { return node_->dirty_blocks() == 0; }));
  EXPECT_EQ(Home(2, 0), a);
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_FALSE(node_->ownership()->quarantined());
  EXPECT_EQ(node_->epoch(), 7u) << "the epoch is persisted";
}

TEST_F(OwnershipTest, ReclaimerDoesNotDestageWhileFenced) {
  ASSERT_NO_FATAL_FAILURE(SetUpCluster(1, 1, 1));
  config_.policy = "lru";  // admits every read miss: reads evict the dirty blocks
  config_.dirty_high_watermark = 0.95;  // no forced destage: only the reclaimer is under test
  config_.dirty_low_watermark = 0.9;
  ASSERT_NO_FATAL_FAILURE(Start());
  const uint32_t per_obj = kHarnessObject / kBs;
  // Dirty blocks filling the cache (N = 1: no log, nothing reaches the data node yet).
  const uint32_t dirty = 200;
  for (uint32_t i = 0; i < dirty; ++i) {
    const std::string d(kBs, static_cast<char>('A' + i % 26));
    ASSERT_TRUE(node_->Write(1, i / per_obj, (i % per_obj) * kBs, kBs, d.data()).ok());
  }
  std::atomic<bool> open{false};
  node_->SetDestageGate([&] { return open.load(); });
  // Read misses of other objects push the dirty blocks out: the reclaimer gets them.
  std::string buf(kBs, '\0');
  for (uint32_t i = 0; i < 400; ++i) {
    ASSERT_TRUE(node_->Read(1, 100 + i / per_obj, (i % per_obj) * kBs, kBs, buf.data()).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  auto stored = dns_->store(0)->ReadBlocks(1, 0, 0, per_obj);
  ASSERT_TRUE(stored.ok());
  for (bool p : stored->present) EXPECT_FALSE(p) << "the reclaimer destaged while fenced";
  EXPECT_EQ(node_->dirty_blocks(), dirty);
  open.store(true);
  EXPECT_TRUE(WaitFor([&] { return node_->dirty_blocks() < dirty; }))
      << "the reclaimer resumes once the gate opens";
}

// Block b of object o holds (o, b) in every 8-byte word: any block home that is not its own
// content came from another block's slot.
std::string Tagged(uint64_t object, uint32_t block, uint32_t gen) {
  std::string d(kBs, '\0');
  const uint64_t tag = (object << 40) | (uint64_t{block} << 16) | (gen & 0xffff);
  for (size_t i = 0; i < kBs; i += 8) std::memcpy(d.data() + i, &tag, 8);
  return d;
}

// DropBlocks releases the slot of a block a destage has chosen but not read yet, and a write
// of another object takes that slot: the destage must not send the other block's data home
// under this block's key. DropBlocks now waits for the object's stripe, which the destage holds.
TEST_F(OwnershipTest, DestageNeverSendsAnotherBlocksSlot) {
  ASSERT_NO_FATAL_FAILURE(SetUpCluster(1, 1, 1));
  ASSERT_NO_FATAL_FAILURE(Start());
  const uint32_t per_obj = kHarnessObject / kBs;
  ASSERT_TRUE(node_->Write(1, 0, 0, kBs, Tagged(0, 0, 1).data()).ok());
  // Push block 0 out of the RAM tier (a dirty block keeps its slot): destage reads the slot.
  for (uint32_t i = 0; i < 40; ++i) {
    const uint64_t o = 1 + i / per_obj;
    const uint32_t b = i % per_obj;
    ASSERT_TRUE(node_->Write(1, o, b * kBs, kBs, Tagged(o, b, 1).data()).ok());
  }
  std::atomic<bool> fired{false}, raced{false};
  std::thread racer;
  node_->SetDestagePlannedHookForTest([&] {
    if (fired.exchange(true)) return;
    racer = std::thread([&] {
      node_->DropBlocks(true, nullptr).IgnoreError();
      node_->Write(1, 9, 0, kBs, Tagged(9, 0, 1).data()).IgnoreError();  // reuses the slot
      raced.store(true);
    });
    // Give the race every chance to happen before the destage reads its slots.
    for (int i = 0; i < 30 && !raced.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  node_->Flush(0).IgnoreError();  // destages block 0 of object 0 first
  if (racer.joinable()) racer.join();
  node_->SetDestagePlannedHookForTest(nullptr);
  ASSERT_TRUE(fired.load());
  auto r = dns_->store(0)->ReadBlocks(1, 0, 0, 1);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->present[0]);
  EXPECT_EQ(r->data, Tagged(0, 0, 1)) << "destage sent another block's slot home";
}

// A failed fdatasync of the SSD file: the write it covered is not acknowledged, no later one
// is (a retried fdatasync would "succeed" after Linux dropped the pages), the node fences
// itself and reports it, and its acknowledged dirty blocks come back from their log replicas.
TEST_F(OwnershipTest, FailedFdatasyncIsStickyAndLosesNothing) {
  ASSERT_NO_FATAL_FAILURE(SetUpCluster(3, 2, 1));
  FaultInjectionFile* file = nullptr;
  config_.open_ssd_file = [&file](const std::string& path)
      -> absl::StatusOr<std::unique_ptr<File>> {
    auto base = OpenPosixFile(path, true);
    if (!base.ok()) return base.status();
    auto f = std::make_unique<FaultInjectionFile>(*std::move(base));
    file = f.get();
    return std::unique_ptr<File>(std::move(f));
  };
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_NE(file, nullptr);
  const std::string a(kBs, 'a'), b(kBs, 'b'), c(kBs, 'c');
  for (uint32_t i = 0; i < 8; ++i) ASSERT_TRUE(node_->Write(1, 3, i * kBs, kBs, a.data()).ok());
  file->FailNextSyncs(1);
  absl::Status s = node_->Write(1, 3, 0, kBs, b.data());
  EXPECT_FALSE(s.ok()) << "a write whose fdatasync failed was acknowledged";
  s = node_->Write(1, 3, kBs, kBs, c.data());
  EXPECT_FALSE(s.ok()) << "a write after a failed fdatasync was acknowledged";
  EXPECT_TRUE(IsKind(node_->CheckOwner(), ErrorKind::kFenced));
  EXPECT_TRUE(IsKind(node_->device_status(), ErrorKind::kDeviceFailed));
  EXPECT_TRUE(node_->ownership()->quarantined()) << "device failure is persisted";
  EXPECT_TRUE(IsKind(node_->Flush(0), ErrorKind::kDeviceFailed))
      << "a failed SSD must not vouch for its slots: the gateway replays the log";
  EXPECT_EQ(registry_.Render().find("ringcache_cachenode_device_failed{node=\"1\"} 1") ==
                std::string::npos,
            false);
  // The gateway's recovery: replay the node's log to the homes.
  ASSERT_TRUE(datanode::ReplayCacheNodeLog(pool_.get(), 1, [](uint32_t) { return 2u; }).ok());
  const std::string h0 = Home(3, 0);
  EXPECT_TRUE(h0 == a || h0 == b) << "block 0 lost its acknowledged data";
  for (uint32_t i = 1; i < 8; ++i) {
    const std::string h = Home(3, i);
    EXPECT_TRUE(h == a || (i == 1 && h == c)) << "block " << i << " lost its acknowledged data";
  }
}

TEST(OwnershipFileTest, RoundTripAndRefusesToGuess) {
  const std::string ssd = ::testing::TempDir() + "/ownership_file_test.slots";
  std::remove(Ownership::PathFor(ssd).c_str());
  {
    auto o = Ownership::Load(ssd);
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_FALSE((*o)->quarantined());  // first start
    EXPECT_EQ((*o)->lease(), 0);
    ASSERT_TRUE((*o)->NoteLease(-1).ok());
    ASSERT_TRUE((*o)->ObserveEpoch(12).ok());
    ASSERT_TRUE((*o)->ObserveEpoch(5).ok());  // never goes back
    ASSERT_TRUE((*o)->Quarantine("lease lost").ok());
    EXPECT_EQ((*o)->term(), 0u);
    ASSERT_TRUE((*o)->ObserveTerm(33).ok());
    EXPECT_TRUE(IsKind((*o)->ObserveTerm(32), ErrorKind::kStaleTerm));
    EXPECT_TRUE((*o)->ObserveTerm(0).ok());
  }
  auto o = Ownership::Load(ssd);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ((*o)->term(), 33u) << "the term outlives a restart";
  EXPECT_TRUE(IsKind((*o)->ObserveTerm(20), ErrorKind::kStaleTerm));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE((*o)->quarantined());
  EXPECT_EQ((*o)->epoch(), 12u);
  EXPECT_EQ((*o)->lease(), -1);
  EXPECT_EQ((*o)->reason(), "lease lost");
  EXPECT_TRUE(IsKind((*o)->Check(), ErrorKind::kFenced));
  {
    std::ofstream f(Ownership::PathFor(ssd));
    f << "garbage\n";
  }
  auto bad = Ownership::Load(ssd);
  EXPECT_TRUE(absl::IsDataLoss(bad.status())) << bad.status();
  std::remove(Ownership::PathFor(ssd).c_str());
}

}  // namespace
}  // namespace ringcache::cachenode
