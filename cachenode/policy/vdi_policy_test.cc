// Tests of per-VDI policies (registry.h SetVdiPolicy, CacheDriver::SetVdiRules, VbqSpace::
// ReplaceOrder): a VDI switches order, admission, bypasses and victim live, keeps every cached
// block and its dirty state, and the specs that cannot run per VDI are refused by name.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "cachenode/policy/registry.h"
#include "cachenode/policy/test_util.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

using testing::Read;
using testing::Write;

PolicyContext Ctx(size_t capacity) {
  PolicyContext ctx;
  ctx.capacity_blocks = capacity;
  return ctx;
}

std::unique_ptr<CachePolicy> Node(const std::string& spec, size_t capacity) {
  auto p = MakePolicy(spec, Ctx(capacity));
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

TEST(VdiPolicyTest, SwitchKeepsBlocksAndChangesAdmission) {
  auto node = Node("vbq+lru", 100);
  Outcome out;
  for (uint64_t b = 0; b < 20; ++b) node->OnAccess(Write(b, 1), &out);
  for (uint64_t b = 0; b < 20; ++b) node->OnAccess(Read(b, 2), &out);
  ASSERT_EQ(node->size(), 40u);
  ASSERT_EQ(node->dirty_count(), 20u);

  ASSERT_TRUE(SetVdiPolicy(node.get(), 1, "arc + sieve", Ctx(100)).ok());
  EXPECT_EQ(VdiPolicyOf(*node, 1), "arc+sieve");
  EXPECT_EQ(VdiPolicyOf(*node, 2), "");
  EXPECT_EQ(node->size(), 40u);
  EXPECT_EQ(node->dirty_count(), 20u);
  for (uint64_t b = 0; b < 20; ++b) EXPECT_NE(node->Lookup(BlockKey{1, b}), Tier::kNone);

  // VDI 1 sieves its read misses now (the first is rejected); VDI 2 still admits every miss.
  node->OnAccess(Read(500, 1), &out);
  EXPECT_TRUE(out.rejected);
  node->OnAccess(Read(500, 1), &out);
  EXPECT_TRUE(out.admitted);
  node->OnAccess(Read(500, 2), &out);
  EXPECT_TRUE(out.admitted);
  // A hit on a block cached before the switch still hits, and stays dirty.
  node->OnAccess(Read(3, 1), &out);
  EXPECT_EQ(out.hit, Tier::kSsd);
  EXPECT_EQ(node->dirty_count(), 20u);

  // Back to the node's policy.
  ASSERT_TRUE(SetVdiPolicy(node.get(), 1, "default", Ctx(100)).ok());
  EXPECT_EQ(VdiPolicyOf(*node, 1), "");
  node->OnAccess(Read(600, 1), &out);
  EXPECT_TRUE(out.admitted);
  EXPECT_EQ(node->size(), 43u);
}

// A VDI's own admission reports its state in the VDI's stats row (ringcachectl stats, the
// node's metrics), and the node's admission no longer speaks for that VDI.
TEST(VdiPolicyTest, AVdisOwnAdmissionReportsItsState) {
  auto node = Node("vbq+lru+sieve(adapt=1,window=100,start=0.25)", 100);
  Outcome out;
  for (uint64_t b = 0; b < 10; ++b) node->OnAccess(Read(b, 1), &out);
  for (uint64_t b = 0; b < 10; ++b) node->OnAccess(Read(b, 2), &out);
  auto admit_first = [&](uint32_t vdi) {
    std::vector<VdiStats> rows;
    node->AppendVdiStats(&rows);
    for (const VdiStats& r : rows) {
      if (r.vdi == vdi) return r.admit_first;
    }
    return -2.0;
  };
  EXPECT_DOUBLE_EQ(admit_first(1), 0.25);
  EXPECT_DOUBLE_EQ(admit_first(2), 0.25);
  ASSERT_TRUE(SetVdiPolicy(node.get(), 1, "lru+sieve(adapt=1,window=100,start=0.75)", Ctx(100))
                  .ok());
  EXPECT_EQ(admit_first(1), -1) << "the VDI's own admission has seen no miss yet";
  node->OnAccess(Read(500, 1), &out);
  EXPECT_DOUBLE_EQ(admit_first(1), 0.75);
  EXPECT_DOUBLE_EQ(admit_first(2), 0.25);
  ASSERT_TRUE(SetVdiPolicy(node.get(), 1, "arc+sieve", Ctx(100)).ok());
  EXPECT_EQ(admit_first(1), -1) << "a sieve that does not adapt has no fraction";
}

TEST(VdiPolicyTest, SwitchKeepsTheEvictionOrder) {
  auto node = Node("vbq+lru", 20);
  Outcome out;
  for (uint64_t b = 0; b < 10; ++b) node->OnAccess(Read(b, 1), &out);
  node->OnAccess(Read(0, 1), &out);  // LRU order, tail first: 1, 2, ..., 9, 0
  ASSERT_TRUE(SetVdiPolicy(node.get(), 1, "fifo", Ctx(20)).ok());
  // Fill past xi * S: VDI 1 is the only queue, so the reclaim takes its tail first.
  std::vector<BlockKey> evicted;
  for (uint64_t b = 10; b < 25; ++b) {
    node->OnAccess(Read(b, 1), &out);
    for (const Eviction& e : out.evicted) evicted.push_back(e.key);
  }
  ASSERT_GE(evicted.size(), 2u);
  EXPECT_EQ(evicted[0], (BlockKey{1, 1}));
  EXPECT_EQ(evicted[1], (BlockKey{1, 2}));
}

TEST(VdiPolicyTest, SpecsThatCannotRunPerVdiAreRefused) {
  auto node = Node("vbq+lru+sieve", 100);
  for (const char* spec : {"uarc", "opt", "vbq+lru", "fifo+rpac", "lru+nonsense", "lru+arc"}) {
    absl::Status s = SetVdiPolicy(node.get(), 1, spec, Ctx(100));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << spec << ": " << s;
    EXPECT_FALSE(ValidateVdiPolicy(spec, Ctx(100)).ok()) << spec;
  }
  EXPECT_NE(SetVdiPolicy(node.get(), 1, "uarc", Ctx(100)).message().find("complete policy"),
            std::string::npos);
  // A node without per-VDI queues cannot give one VDI its own order.
  auto global = Node("lru", 100);
  EXPECT_EQ(SetVdiPolicy(global.get(), 1, "arc", Ctx(100)).code(),
            absl::StatusCode::kFailedPrecondition);
  auto tiered = Node("uarc(ram=10)", 100);
  EXPECT_EQ(SetVdiPolicy(tiered.get(), 1, "arc", Ctx(100)).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(VdiPolicyTest, EveryPerVdiPolicyRunsAndNoDirtyBlockIsLost) {
  // Random reads, writes and destages over four VDIs, with a random VDI switched to a random
  // policy every 500 accesses. A dirty block may leave the cache only as a dirty eviction.
  std::vector<std::string> specs;
  for (const std::string& s : KnownPolicies()) {
    if (ValidateVdiPolicy(s, Ctx(300)).ok()) specs.push_back(s);
  }
  specs.push_back("default");
  ASSERT_GE(specs.size(), 10u);
  auto node = Node(kDefaultPolicy, 300);
  std::mt19937_64 rng(17);
  absl::flat_hash_set<BlockKey> dirty;
  Outcome out;
  for (int i = 0; i < 60000; ++i) {
    if (i % 500 == 0) {
      const uint32_t vdi = rng() % 4;
      const std::string& spec = specs[rng() % specs.size()];
      ASSERT_TRUE(SetVdiPolicy(node.get(), vdi, spec, Ctx(300)).ok()) << spec;
      ASSERT_EQ(node->dirty_count(), dirty.size()) << "after switching to " << spec;
    }
    const BlockKey key{static_cast<uint32_t>(rng() % 4), rng() % 400};
    const bool write = rng() % 3 == 0;
    node->OnAccess(write ? Write(key.block, key.vdi) : Read(key.block, key.vdi), &out);
    for (const Eviction& e : out.evicted) {
      EXPECT_EQ(e.dirty, dirty.count(e.key) == 1) << "block " << e.key.block;
      dirty.erase(e.key);
    }
    if (write && (out.hit != Tier::kNone || out.admitted)) dirty.insert(key);
    if (rng() % 50 == 0 && !dirty.empty()) {
      auto it = dirty.begin();
      std::advance(it, rng() % dirty.size());
      const BlockKey k = *it;
      ASSERT_TRUE(node->MarkClean(k));
      dirty.erase(k);
    }
    ASSERT_LE(node->size(), node->capacity());
  }
  EXPECT_EQ(node->dirty_count(), dirty.size());
  for (const BlockKey& k : dirty) EXPECT_NE(node->Lookup(k), Tier::kNone);
}

// Shares per VDI (SetVdiShare, VbqSpace::SetShare): VDI 1 streams through new blocks (never
// reused, many accesses: VBQ would give it most of the cache by eq. 2), VDI 2 has a small hot set.
// With a maximum share of 20% for VDI 1, it never holds more than 20 of the 100 blocks and VDI 2
// keeps its hot set; with a minimum share of 30% for VDI 2 instead, VDI 2 keeps at least 30
// blocks however cold it gets.
int Held(CachePolicy* node, uint32_t vdi) {
  std::vector<VdiStats> rows;
  node->AppendVdiStats(&rows);
  for (const VdiStats& r : rows) {
    if (r.vdi == vdi) return static_cast<int>(r.blocks);
  }
  return 0;
}

TEST(VdiShareTest, AMaximumShareCapsAVdiAndAMinimumShareKeepsOne) {
  Outcome out;
  {
    auto node = Node("vbq+lru", 100);
    ASSERT_TRUE(SetVdiShare(node.get(), 1, 0, 0.2).ok());
    int most = 0;
    for (uint64_t i = 0; i < 5000; ++i) {
      node->OnAccess(Read(100000 + i, 1), &out);
      node->OnAccess(Read(100000 + i + 1, 1), &out);
      if (i % 10 == 0) node->OnAccess(Read((i / 10) % 40, 2), &out);
      most = std::max(most, Held(node.get(), 1));
    }
    EXPECT_LE(most, 20);
    EXPECT_GE(Held(node.get(), 2), 35);  // the hot set of 40 keeps (nearly) all its blocks
  }
  {
    auto free = Node("vbq+lru", 100);
    auto kept = Node("vbq+lru", 100);
    ASSERT_TRUE(SetVdiShare(kept.get(), 2, 0.3, 1).ok());
    for (CachePolicy* node : {free.get(), kept.get()}) {
      for (uint64_t b = 0; b < 50; ++b) node->OnAccess(Read(b, 2), &out);
      for (uint64_t i = 0; i < 20000; ++i) node->OnAccess(Read(100000 + i % 500, 1), &out);
    }
    EXPECT_LT(Held(free.get(), 2), 10);  // without a share, the cold VDI is reclaimed away
    EXPECT_GE(Held(kept.get(), 2), 30);
    EXPECT_LE(Held(kept.get(), 2), 50);
  }
}

TEST(VdiShareTest, SharesAreCheckedAndNeedAVbqSpace) {
  auto node = Node("vbq+lru", 100);
  EXPECT_FALSE(SetVdiShare(node.get(), 1, 0.5, 0.4).ok());  // min > max
  EXPECT_FALSE(SetVdiShare(node.get(), 1, 0, 0).ok());      // max 0
  EXPECT_FALSE(SetVdiShare(node.get(), 1, -0.1, 1).ok());
  ASSERT_TRUE(SetVdiShare(node.get(), 1, 0.5, 1).ok());
  absl::Status s = SetVdiShare(node.get(), 2, 0.5, 1);  // the minimums would sum to 1 > alpha
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("sum"), std::string::npos) << s;
  EXPECT_TRUE(SetVdiShare(node.get(), 1, 0.3, 1).ok());  // VDI 1's own is replaced, not added
  // No share for a VDI the cache has not seen: no queue for it either (an idle VDI takes no part
  // of the utility targets).
  std::vector<VdiStats> rows;
  ASSERT_TRUE(SetVdiShare(node.get(), 7, 0, 1).ok());
  node->AppendVdiStats(&rows);
  for (const VdiStats& r : rows) EXPECT_NE(r.vdi, 7u);
  EXPECT_TRUE(SetVdiShare(node.get(), 2, 0.5, 1).ok());
  EXPECT_EQ(SetVdiShare(Node("lru", 100).get(), 1, 0.1, 1).code(),
            absl::StatusCode::kFailedPrecondition);
  PolicyContext tiers = Ctx(100);
  tiers.ram_blocks = 10;
  auto uarc = MakePolicy("uarc", tiers);
  ASSERT_TRUE(uarc.ok()) << uarc.status();
  EXPECT_EQ(SetVdiShare(uarc->get(), 1, 0.1, 1).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ringcache::policy
