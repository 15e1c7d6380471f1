// ShardedPolicy (sharded_policy.h) and RingRoute (replay.h): one simulated cache per cache node.
#include "tools/sim/sharded_policy.h"

#include <gtest/gtest.h>

#include "cachenode/policy/registry.h"
#include "ring/ring.h"
#include "tools/sim/replay.h"

namespace ringcache::sim {
namespace {

std::unique_ptr<policy::CachePolicy> Lru(size_t blocks) {
  policy::PolicyContext ctx;
  ctx.capacity_blocks = blocks;
  return *policy::MakePolicy("lru", ctx);
}

policy::Access Read(uint32_t vdi, uint64_t block) {
  policy::Access a;
  a.key = {vdi, block};
  a.op = policy::Op::kRead;
  return a;
}

TEST(ShardedPolicyTest, EachShardIsItsOwnCache) {
  // Even blocks to shard 0, odd to shard 1, two blocks each: 4 blocks fit in all, but not 3
  // even ones.
  std::vector<std::unique_ptr<policy::CachePolicy>> shards;
  shards.push_back(Lru(2));
  shards.push_back(Lru(2));
  ShardedPolicy p(std::move(shards), [](const policy::BlockKey& k) { return k.block % 2; });
  EXPECT_EQ(p.capacity(), 4u);
  policy::Outcome out;
  for (uint64_t b : {0, 1, 2, 3}) p.OnAccess(Read(0, b), &out);
  EXPECT_EQ(p.size(), 4u);
  for (uint64_t b : {0, 1, 2, 3}) {
    p.OnAccess(Read(0, b), &out);
    EXPECT_NE(out.hit, policy::Tier::kNone) << b;
  }
  p.OnAccess(Read(0, 4), &out);  // shard 0 evicts its LRU, block 0; shard 1 keeps 1 and 3
  EXPECT_EQ(p.Lookup({0, 0}), policy::Tier::kNone);
  EXPECT_NE(p.Lookup({0, 1}), policy::Tier::kNone);
  EXPECT_NE(p.Lookup({0, 3}), policy::Tier::kNone);
  EXPECT_EQ(p.size(), 4u);
}

TEST(ShardedPolicyTest, RingRouteSendsABlockToItsObjectsOwner) {
  ClusterLayout layout;
  layout.ring = {{1, 1.0}, {2, 1.0}, {5, 2.0}};
  layout.vdi_ids = {7, 9};
  layout.object_sizes = {1 << 20, 4 << 20};
  auto route = RingRoute(layout, 4096);
  ASSERT_TRUE(route.ok()) << route.status();
  ring::RingConfig rc;
  rc.members = {{1, 1.0, ""}, {2, 1.0, ""}, {5, 2.0, ""}};
  const ring::Ring ring = *ring::Ring::Build(rc);
  size_t per_node[3] = {0, 0, 0};
  for (uint32_t v = 0; v < 2; ++v) {
    const uint64_t per_object = layout.object_sizes[v] / 4096;
    for (uint64_t block = 0; block < 200000; block += 97) {
      const size_t i = (*route)(policy::BlockKey{v, block});
      ASSERT_LT(i, 3u);
      EXPECT_EQ(layout.ring[i].first,
                ring.Owner(ring::ObjectKey{layout.vdi_ids[v], block / per_object}));
      ++per_node[i];
    }
  }
  for (size_t n : per_node) EXPECT_GT(n, 0u);
  EXPECT_GT(per_node[2], per_node[0]);  // twice the weight
  layout.object_sizes[1] = 1024;        // below the block size
  EXPECT_FALSE(RingRoute(layout, 4096).ok());
}

}  // namespace
}  // namespace ringcache::sim
