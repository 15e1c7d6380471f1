// BlockMap without I/O: plans in, leftovers out.
#include "cachenode/block_map.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "cachenode/policy/registry.h"
#include "common/clock.h"

namespace ringcache::cachenode {
namespace {

class BlockMapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    v1::VdiGeometry g;
    g.set_vdi_id(1);
    g.set_name("v");
    g.set_size_bytes(64 << 20);
    g.set_object_size(64 << 10);
    g.set_block_size(4096);
    g.set_replication(2);
    ASSERT_TRUE(vdis_.Register(g).ok());
    Build("lru", 64);
    v_ = *vdis_.Get(1);
  }
  // A map over `slots` SSD slots and 2 RAM blocks, built as the cache node builds it.
  void Build(const std::string& placement_spec, size_t slots) {
    policy::PolicyContext ctx;
    ctx.capacity_blocks = slots;
    ctx.ram_blocks = 2;
    auto placement = policy::MakePlacement(placement_spec, 2);
    ASSERT_TRUE(placement.ok()) << placement.status();
    auto policy = policy::MakePolicy("lru", policy::NodeMembershipContext(ctx, **placement));
    ASSERT_TRUE(policy.ok()) << policy.status();
    map_ = std::make_unique<BlockMap>(*std::move(policy), *std::move(placement), 4096, &vdis_,
                                      &clock_, registry_.GetCounter("evictions", "e"));
  }
  // Runs the reclaimer's queue: demotions into slot 100 + block; returns the evicted keys.
  std::vector<uint64_t> DrainWork() {
    std::vector<uint64_t> evicted;
    ReclaimWork w;
    while (map_->TakeWork(absl::ZeroDuration(), &w)) {
      if (!w.demote) {
        evicted.push_back(w.key.block);
        continue;
      }
      if (auto ram = map_->BeginDemote(w.key)) {
        EXPECT_TRUE(map_->FinishDemote(w.key, ram, 100 + static_cast<uint32_t>(w.key.block)));
      }
    }
    return evicted;
  }
  // Reads block `b` of object 0 through the map and fills it like the node does.
  ReadPlan ReadAndFill(uint32_t b, uint32_t slot) {
    std::vector<ReadPlan> plan;
    map_->PlanRead(v_, 0, b, 1, &plan);
    const BlockKey key = v_.KeyOf(0, b);
    if (plan[0].admit || plan[0].promote) {
      if (map_->FillOrPromote(key, plan[0].promote,
                              std::make_shared<const std::string>(4096, 'x'))) {
        EXPECT_TRUE(map_->PlaceFilled(key, slot));
      }
    }
    return plan[0];
  }
  BlockEntry EntryOf(uint32_t b) {
    BlockEntry found;
    map_->ForEach([&](const BlockKey& k, const BlockEntry& e) {
      if (k == v_.KeyOf(0, b)) found = e;
    });
    return found;
  }

  metrics::Registry registry_;
  VdiTable vdis_{1, 4096, "/nonexistent/vdis", &registry_};
  SimulatedClock clock_;
  std::unique_ptr<BlockMap> map_;
  VdiInfo v_;
};

TEST_F(BlockMapTest, WriteBackMakesOneDirtyTruthAndDestageCleansIt) {
  std::vector<uint32_t> slots = {10, 11, 12};
  std::vector<uint32_t> landed = {2, 3};
  std::string data(3 * 4096, 'd');
  EXPECT_FALSE(map_->AccessForWrite(v_, 0, 4, 3));
  Leftovers left;
  map_->CommitWrite({&v_, 0, 4, 3, slots.data(), false, 100, 7, &landed, data.data()}, &left);
  EXPECT_TRUE(left.slots.empty());
  EXPECT_EQ(map_->dirty_blocks(), 3u);
  EXPECT_EQ(v_.counters->dirty_blocks.load(), 3);
  EXPECT_EQ(map_->LiveLogSeqs(), (absl::flat_hash_set<uint64_t>{100, 101, 102}));
  // The destage plan coalesces the object's adjacent dirty blocks.
  auto run = map_->PlanDestage(v_.KeyOf(0, 5), v_.blocks_per_object(), 256);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->first_block, 4u);
  ASSERT_EQ(run->blocks.size(), 3u);
  EXPECT_EQ(run->blocks[0].log_seq, 100u);
  EXPECT_EQ(run->blocks[2].epoch, 7u);
  // Only `key` when asked for one block.
  EXPECT_EQ(map_->PlanDestage(v_.KeyOf(0, 5), v_.blocks_per_object(), 1)->blocks.size(), 1u);
  std::vector<uint32_t> clean;
  map_->MarkDestaged(1, 4, 3, &clean, &left);
  EXPECT_EQ(clean, (std::vector<uint32_t>{10, 11, 12}));
  EXPECT_EQ(left.log_seqs, (std::vector<uint64_t>{100, 101, 102}));
  EXPECT_EQ(map_->dirty_blocks(), 0u);
  EXPECT_EQ(v_.counters->dirty_blocks.load(), 0);
  EXPECT_TRUE(map_->LiveLogSeqs().empty());
  EXPECT_FALSE(map_->NextDirty().has_value());
}

TEST_F(BlockMapTest, OldestDirtyAgeFollowsTheOldestBlockWhateverTheDestageOrder) {
  std::vector<uint32_t> landed = {2};
  std::string data(4096, 'a');
  Leftovers left;
  EXPECT_EQ(map_->OldestDirtyAge(1), absl::ZeroDuration());
  uint32_t s0 = 30, s1 = 31, s2 = 32, s3 = 33;
  map_->CommitWrite({&v_, 0, 0, 1, &s0, false, 1, 1, &landed, data.data()}, &left);
  clock_.Advance(absl::Seconds(5));
  map_->CommitWrite({&v_, 0, 1, 1, &s1, false, 2, 1, &landed, data.data()}, &left);
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(map_->OldestDirtyAge(1), absl::Seconds(7));
  // A rewrite of a dirty block keeps its age: it has not been home since.
  map_->CommitWrite({&v_, 0, 0, 1, &s2, false, 3, 1, &landed, data.data()}, &left);
  EXPECT_EQ(map_->OldestDirtyAge(1), absl::Seconds(7));
  // The destage takes block 0 and fails: it waits behind block 1, still the oldest.
  const std::optional<BlockKey> first = map_->NextDirty();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->block, 0u);
  map_->RequeueDirty(*first);
  EXPECT_EQ(map_->OldestDirtyAge(1), absl::Seconds(7));
  EXPECT_EQ(map_->OldestDirtyAge(2), absl::ZeroDuration());
  // Home at last: block 1 (2 s old) is the oldest.
  std::vector<uint32_t> clean;
  map_->MarkDestaged(1, 0, 1, &clean, &left);
  EXPECT_EQ(map_->OldestDirtyAge(1), absl::Seconds(2));
  // Write-through of block 1 (clean at once) and a fresh dirty block 3.
  clock_.Advance(absl::Seconds(1));
  map_->CommitWrite({&v_, 0, 1, 1, &s3, true, 0, 0, &landed, data.data()}, &left);
  EXPECT_EQ(map_->OldestDirtyAge(1), absl::ZeroDuration());
  uint32_t s4 = 34;
  map_->CommitWrite({&v_, 0, 3, 1, &s4, false, 4, 1, &landed, data.data()}, &left);
  clock_.Advance(absl::Seconds(4));
  EXPECT_EQ(map_->OldestDirtyAge(1), absl::Seconds(4));
}

TEST_F(BlockMapTest, RewriteSupersedesTheOldSlotAndRecord) {
  std::vector<uint32_t> landed = {2};
  std::string data(4096, 'a');
  uint32_t s1 = 20, s2 = 21;
  Leftovers left;
  map_->CommitWrite({&v_, 0, 0, 1, &s1, false, 5, 1, &landed, data.data()}, &left);
  map_->CommitWrite({&v_, 0, 0, 1, &s2, false, 6, 1, &landed, data.data()}, &left);
  EXPECT_EQ(left.slots, (std::vector<uint32_t>{20}));
  EXPECT_EQ(left.log_seqs, (std::vector<uint64_t>{5}));
  EXPECT_EQ(map_->dirty_blocks(), 1u);
  EXPECT_EQ(map_->DirtyBlock(v_.KeyOf(0, 0))->log_seq, 6u);
}

TEST_F(BlockMapTest, APromotedBlockKeepsItsSlotSoDemotionWritesNothing) {
  // Miss: admitted to RAM first (LRU placement of 2 RAM blocks) — no slot.
  EXPECT_TRUE(ReadAndFill(0, 30).miss);
  // Two more blocks push block 0 out of RAM: it must be written to a slot (demotion work).
  ReadAndFill(1, 31);
  ReadAndFill(2, 32);
  ReclaimWork w;
  std::shared_ptr<const std::string> ram;
  while (map_->TakeWork(absl::ZeroDuration(), &w)) {
    if (w.demote && w.key == v_.KeyOf(0, 0)) ram = map_->BeginDemote(w.key);
  }
  ASSERT_NE(ram, nullptr) << "a RAM-only clean block is demoted by writing it";
  ASSERT_TRUE(map_->FinishDemote(v_.KeyOf(0, 0), ram, 40));
  // A hit on SSD promotes it back to RAM: the slot stays as a shadow copy.
  ReadPlan p = ReadAndFill(0, 0);
  EXPECT_TRUE(p.promote);
  BlockEntry e = EntryOf(0);
  EXPECT_NE(e.ram, nullptr);
  EXPECT_EQ(e.slot, 40);
  // Pushed out of RAM again: it leaves RAM at once, with no demotion work to do.
  ReadAndFill(1, 0);
  ReadAndFill(2, 0);
  while (map_->TakeWork(absl::ZeroDuration(), &w)) {
    EXPECT_FALSE(w.demote && w.key == v_.KeyOf(0, 0)) << "nothing to write, nothing queued";
  }
  e = EntryOf(0);
  EXPECT_EQ(e.ram, nullptr);
  EXPECT_EQ(e.slot, 40);
}

// A large read is a stream: its SSD hits are served from SSD, nothing moves to RAM, and the
// blocks in RAM stay there (the RAM tier is not flushed by a scan).
TEST_F(BlockMapTest, StreamReadsDoNotReorderTheTiers) {
  map_->set_stream_read_blocks(4);
  for (uint32_t b = 0; b < 6; ++b) ReadAndFill(b, 10 + b);  // 4 and 5 end in RAM (2 blocks)
  ReclaimWork w;
  while (map_->TakeWork(absl::ZeroDuration(), &w)) {
    if (!w.demote) continue;
    auto ram = map_->BeginDemote(w.key);
    if (ram) {
      ASSERT_TRUE(map_->FinishDemote(w.key, ram, 20 + w.key.block));
    }
  }
  ASSERT_NE(EntryOf(4).ram, nullptr);
  ASSERT_EQ(EntryOf(0).ram, nullptr);
  std::vector<ReadPlan> plan;
  map_->PlanRead(v_, 0, 0, 4, &plan);  // blocks 0-3: a stream of SSD hits
  for (const ReadPlan& p : plan) {
    EXPECT_FALSE(p.miss);
    EXPECT_FALSE(p.promote);
    EXPECT_GE(p.slot, 0);
  }
  EXPECT_NE(EntryOf(4).ram, nullptr);
  EXPECT_NE(EntryOf(5).ram, nullptr);
  // The same block read alone is promoted as usual.
  map_->PlanRead(v_, 0, 0, 1, &plan);
  EXPECT_TRUE(plan[0].promote);
}

TEST_F(BlockMapTest, ObsoleteBlocksAreDroppedWithTheirRecord) {
  std::vector<uint32_t> landed = {2};
  std::string data(4096, 'o');
  uint32_t slot = 50;
  Leftovers left;
  map_->CommitWrite({&v_, 0, 9, 1, &slot, false, 77, 3, &landed, data.data()}, &left);
  map_->DiscardObsolete(v_.KeyOf(0, 9), &left);
  EXPECT_EQ(left.slots, (std::vector<uint32_t>{50}));
  EXPECT_EQ(left.log_seqs, (std::vector<uint64_t>{77}));
  EXPECT_EQ(map_->dirty_blocks(), 0u);
  EXPECT_EQ(map_->cached_blocks(), 0u);
  EXPECT_EQ(v_.counters->dirty_blocks.load(), 0);
}

TEST_F(BlockMapTest, RelogFindsBlocksWhoseRecordSitsOnALostNode) {
  std::vector<uint32_t> on2 = {2}, on3 = {3}, unknown = {};
  std::string data(4096, 'r');
  uint32_t a = 60, b = 61, c = 62;
  Leftovers left;
  map_->CommitWrite({&v_, 0, 0, 1, &a, false, 1, 1, &on2, data.data()}, &left);
  map_->CommitWrite({&v_, 0, 1, 1, &b, false, 2, 1, &on3, data.data()}, &left);
  map_->CommitWrite({&v_, 0, 2, 1, &c, false, 3, 1, &unknown, data.data()}, &left);
  auto keys = map_->DirtyLoggedOn({3});
  std::sort(keys.begin(), keys.end(),
            [](const BlockKey& x, const BlockKey& y) { return x.block < y.block; });
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0].block, 1u);  // landed on the lost node
  EXPECT_EQ(keys[1].block, 2u);  // landing unknown: relogged to be safe
  map_->MoveLogRecord(v_.KeyOf(0, 1), 2, 9, {2});
  EXPECT_EQ(map_->DirtyBlock(v_.KeyOf(0, 1))->log_seq, 9u);
  EXPECT_EQ(map_->DirtyLoggedOn({3}).size(), 1u);
}

// Exclusive tiers (placement "lru(exclusive)"): the membership holds SSD slots + RAM blocks; a
// clean block in RAM holds no slot; slot pressure sheds the policy's victims.
TEST_F(BlockMapTest, ExclusiveTiersAddRamToTheMembershipAndFreeShadowsFirst) {
  Build("lru(exclusive)", 4);                          // 4 slots + 2 RAM blocks
  for (uint32_t b = 0; b < 6; ++b) ReadAndFill(b, 0);  // fills go to RAM; 0..3 are demoted
  EXPECT_TRUE(DrainWork().empty()) << "6 blocks fit: nothing evicted";
  EXPECT_EQ(map_->cached_blocks(), 6u);
  EXPECT_EQ(EntryOf(0).slot, 100);
  // An SSD hit promoted to RAM keeps its slot as a shadow (block 4 goes down in exchange).
  EXPECT_TRUE(ReadAndFill(0, 0).promote);
  EXPECT_EQ(EntryOf(0).slot, 100);
  DrainWork();
  // A dirty block in RAM keeps its slot; destaged, it is a shadow too, once its slot is marked.
  std::vector<uint32_t> landed = {2};
  std::string data(4096, 'w');
  uint32_t slot = 50;
  Leftovers left;
  EXPECT_FALSE(map_->AccessForWrite(v_, 0, 5, 1));
  map_->CommitWrite({&v_, 0, 5, 1, &slot, false, 9, 1, &landed, data.data()}, &left);
  EXPECT_NE(EntryOf(5).ram, nullptr);
  std::vector<uint32_t> clean;
  map_->MarkDestaged(1, 5, 1, &clean, &left);
  EXPECT_EQ(clean, (std::vector<uint32_t>{50}));
  map_->NoteDestagedShadows(1, 5, 1);
  DrainWork();
  // Slot pressure: the shadow slots go first, oldest first (block 0's, then block 5's); nothing
  // leaves the cache.
  Leftovers freed;
  EXPECT_EQ(map_->RelieveSlotPressure(/*free=*/0, /*need=*/2, &freed), 2u);
  EXPECT_EQ(freed.slots, (std::vector<uint32_t>{100, 50}));
  EXPECT_EQ(EntryOf(0).slot, -1);
  EXPECT_NE(EntryOf(0).ram, nullptr);
  EXPECT_EQ(map_->shed_blocks(), 0u);
  EXPECT_TRUE(DrainWork().empty());
  // Then members: LRU victims until two that hold a slot are queued for the reclaimer.
  EXPECT_EQ(map_->RelieveSlotPressure(0, 2, &freed), 2u);
  EXPECT_EQ(map_->RelieveSlotPressure(0, 2, &freed), 0u) << "two are on their way back already";
  EXPECT_GE(map_->shed_blocks(), 2u);
  EXPECT_EQ(freed.slots.size(), 2u);
  EXPECT_EQ(DrainWork().size(), map_->shed_blocks());
}

TEST_F(BlockMapTest, SlotPressureIsNotRelievedWithoutExclusiveTiers) {
  for (uint32_t b = 0; b < 6; ++b) ReadAndFill(b, 0);
  DrainWork();
  Leftovers freed;
  EXPECT_EQ(map_->RelieveSlotPressure(0, 2, &freed), 0u);
  EXPECT_TRUE(DrainWork().empty());
  EXPECT_EQ(map_->cached_blocks(), 6u);
}

}  // namespace
}  // namespace ringcache::cachenode
