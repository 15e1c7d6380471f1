// The status health line: levels and reasons from a ClusterStatus answer.
#include "tools/ctl/health.h"

#include "gtest/gtest.h"

namespace ringcache::ctl {
namespace {

v1::ClusterStatusResponse Cluster(const std::vector<std::pair<std::string, std::string>>& nodes) {
  v1::ClusterStatusResponse r;
  uint32_t id = 0;
  for (const auto& [role, state] : nodes) {
    v1::NodeInfo* n = r.add_nodes();
    n->set_role(role);
    n->set_id(++id);
    n->set_state(state);
  }
  r.mutable_rebalance()->set_state("idle");
  return r;
}

TEST(CtlHealthTest, AllUpIsOk) {
  const Health h = ClusterHealth(Cluster({{"cachenode", "up"}, {"datanode", "up"}}));
  EXPECT_EQ(h.Line(), "OK");
}

TEST(CtlHealthTest, DownNodesAreErrorsAndComeBeforeWarnings) {
  auto r = Cluster({{"cachenode", "quarantined"}, {"cachenode", "up"}, {"datanode", "down"},
                    {"cachenode", "failed"}, {"cachenode", "removed"}});
  EXPECT_EQ(ClusterHealth(r).Line(),
            "ERR: data node 3 down; cache node 4 failed (its SSD); cache node 1 quarantined");
}

TEST(CtlHealthTest, QuarantineAndRebalanceWarn) {
  auto r = Cluster({{"cachenode", "quarantined"}, {"cachenode", "up"}});
  r.mutable_rebalance()->set_state("copying");
  r.mutable_rebalance()->set_blocks_scanned(10);
  r.mutable_rebalance()->set_blocks_estimated(40);
  EXPECT_EQ(ClusterHealth(r).Line(),
            "WARN: cache node 1 quarantined; data rebalance copying (10 of ~40 blocks scanned)");
}

TEST(CtlHealthTest, NoCacheNodeUpIsAnError) {
  auto r = Cluster({{"cachenode", "quarantined"}, {"datanode", "up"}});
  const Health h = ClusterHealth(r);
  EXPECT_EQ(h.level, "ERR");
  EXPECT_EQ(h.reasons.front(), "no cache node up");
}

}  // namespace
}  // namespace ringcache::ctl
