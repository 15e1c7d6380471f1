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

}  // namespace
}  // namespace ringcache::policy
