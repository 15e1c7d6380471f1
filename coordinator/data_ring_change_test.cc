// The data ring's pure transitions (coordinator/data_ring_change.h): a node out mid-move and at
// rest, the last node refused, the switch after a copy, and the plans for joins, decommissions
// and nodes put back in.
#include "coordinator/data_ring_change.h"

#include <gtest/gtest.h>

namespace ringcache::coordinator {
namespace {

using datanode::DataNodeEndpoint;
using datanode::DataRing;
using Ids = std::vector<uint32_t>;

DataNodeEndpoint Node(uint32_t id) {
  return {id, "127.0.0.1:" + std::to_string(7000 + id), 1.0, ""};
}

DataRing Ring(uint64_t epoch, Ids members, Ids target = {}, Ids out = {}) {
  DataRing r;
  r.epoch = epoch;
  r.members = members;
  r.target = target;
  r.out = out;
  Ids all = members;
  all.insert(all.end(), target.begin(), target.end());
  for (uint32_t id : all) {
    bool known = false;
    for (const auto& n : r.nodes) known = known || n.id == id;
    if (!known) r.nodes.push_back(Node(id));
  }
  return r;
}

TEST(DataRingChangeTest, NodesOutLeaveTheTargetAndStayListed) {
  auto next = RingWithNodesOut(Ring(4, {1, 2, 3}), {2});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->epoch, 5u);
  EXPECT_EQ(next->members, (Ids{1, 2, 3})) << "an out member still places objects";
  EXPECT_EQ(next->target, (Ids{1, 3})) << "its replicas are made again on the others";
  EXPECT_EQ(next->out, (Ids{2}));
  // Mid-move: the target is the move's, minus the node.
  next = RingWithNodesOut(Ring(7, {1, 2}, {1, 2, 4}), {4});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->target, (Ids{1, 2}));
  EXPECT_EQ(next->out, (Ids{4}));
  // Out twice is listed once.
  next = RingWithNodesOut(Ring(7, {1, 2, 3}, {1, 3}, {2}), {2});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->out, (Ids{2}));
}

TEST(DataRingChangeTest, TheLastNodeCannotGoOut) {
  auto next = RingWithNodesOut(Ring(4, {1, 2}), {1, 2});
  EXPECT_EQ(next.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(next.status().message().find("no data node would be left"), std::string::npos);
}

TEST(DataRingChangeTest, AfterTheCopyTheTargetBecomesTheMembers) {
  // Node 2 went out mid-move, node 3 is decommissioned (copied from, not out), node 4 joins.
  const DataRing next = RingAfterCopy(Ring(9, {1, 2, 3}, {1, 4}, {2}));
  EXPECT_EQ(next.epoch, 10u);
  EXPECT_EQ(next.members, (Ids{1, 4}));
  EXPECT_TRUE(next.target.empty());
  EXPECT_EQ(next.out, (Ids{2, 3}))
      << "members that left stay out: they do not rejoin by themselves";
  ASSERT_EQ(next.nodes.size(), 2u);
  EXPECT_EQ(next.nodes[1].id, 4u);
  EXPECT_TRUE(next.Validate().ok()) << next.Validate();
}

TEST(DataRingChangeTest, NothingAskedIsIdle) {
  DataRingAsks asks;
  asks.wanted = {Node(1), Node(2)};
  const DataRingPlan plan = PlanDataRing(Ring(3, {1, 2}), asks);
  EXPECT_TRUE(plan.idle());
  EXPECT_EQ(plan.reason(), "");
}

TEST(DataRingChangeTest, AWantedNodeJoinsTheTargetAndAnOutOneDoesNot) {
  DataRingAsks asks;
  asks.wanted = {Node(1), Node(2), Node(3), Node(5)};
  const DataRingPlan plan = PlanDataRing(Ring(3, {1, 2, 5}, {}, {5}), asks);
  ASSERT_EQ(plan.joining.size(), 1u);
  EXPECT_EQ(plan.joining[0].id, 3u);
  EXPECT_EQ(plan.reason(), "join");
  EXPECT_EQ(plan.prep.epoch, 4u);
  EXPECT_EQ(plan.prep.members, (Ids{1, 2, 5}));
  EXPECT_EQ(plan.prep.target, (Ids{1, 2, 5, 3}));
  EXPECT_EQ(plan.prep.out, (Ids{5})) << "an out node rejoins only when put back in";
  EXPECT_TRUE(plan.prep.Validate().ok()) << plan.prep.Validate();
}

TEST(DataRingChangeTest, PutBackInLeavesTheOutListAndRejoins) {
  DataRingAsks asks;
  asks.in = {5, 2};  // 2 is not out: that ask is done
  asks.wanted = {Node(1), Node(2), Node(5)};
  // Node 5 went out and its move ended: it is no member any more.
  const DataRingPlan plan = PlanDataRing(Ring(8, {1, 2}, {}, {5}), asks);
  EXPECT_EQ(plan.back_in, (Ids{5}));
  EXPECT_EQ(plan.in_done, (Ids{2}));
  ASSERT_EQ(plan.joining.size(), 1u);
  EXPECT_EQ(plan.joining[0].id, 5u);
  EXPECT_TRUE(plan.prep.out.empty());
  EXPECT_EQ(plan.prep.target, (Ids{1, 2, 5}));
}

TEST(DataRingChangeTest, ADecommissionedMemberLeavesTheTargetAndDoesNotJoin) {
  DataRingAsks asks;
  asks.wanted = {Node(1), Node(2), Node(3), Node(4)};
  asks.decommission = {2, 4, 9};  // 4 is no member (must not join), 9 unknown
  const DataRingPlan plan = PlanDataRing(Ring(2, {1, 2, 3}), asks);
  EXPECT_EQ(plan.leaving, (Ids{2}));
  EXPECT_TRUE(plan.joining.empty());
  EXPECT_EQ(plan.reason(), "decommission");
  EXPECT_EQ(plan.prep.members, (Ids{1, 2, 3}));
  EXPECT_EQ(plan.prep.target, (Ids{1, 3}));
  // Both at once.
  asks.wanted.push_back(Node(6));
  EXPECT_EQ(PlanDataRing(Ring(2, {1, 2, 3}), asks).reason(), "join,decommission");
}

TEST(DataRingChangeTest, AJoiningNodeAtANewAddressReplacesItsOldEndpoint) {
  DataRing cur = Ring(5, {1, 2}, {}, {3});
  cur.nodes.push_back({3, "127.0.0.1:1", 1.0, ""});  // an out node the ring still lists
  DataRingAsks asks;
  asks.in = {3};
  asks.wanted = {Node(1), Node(2), Node(3)};
  const DataRingPlan plan = PlanDataRing(cur, asks);
  int listed = 0;
  for (const auto& n : plan.prep.nodes) {
    if (n.id == 3) {
      ++listed;
      EXPECT_EQ(n.address, Node(3).address);
    }
  }
  EXPECT_EQ(listed, 1);
}

}  // namespace
}  // namespace ringcache::coordinator
