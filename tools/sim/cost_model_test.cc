// Tests of the cost model: serial virtual time (paper 001), queueing, placement, LoadView.
#include "tools/sim/cost_model.h"

#include "gtest/gtest.h"

namespace ringcache::sim {
namespace {

using policy::BlockKey;

TEST(SimCostModel, DefaultsAreTableOneOfPaper001) {
  CostConfig c;
  EXPECT_EQ(c.ssd_read_us, 25);
  EXPECT_EQ(c.ssd_write_us, 200);
  EXPECT_EQ(c.hdd_read_us, 5000);
  EXPECT_EQ(c.hdd_write_us, 5000);
  EXPECT_TRUE(c.Validate().ok());
}

TEST(SimCostModel, SerialTimeIsThePaperFormula) {
  DeviceModel m(CostConfig{});
  // 3 SSD read hits, 2 SSD writes, 4 read misses, 1 flush.
  for (int i = 0; i < 3; ++i) m.SsdRead(0);
  for (int i = 0; i < 2; ++i) m.SsdWrite(0);
  for (int i = 0; i < 4; ++i) m.HddRead(BlockKey{0, uint64_t(i) * 5000}, 0);
  m.HddWrite(BlockKey{1, 7}, 0);
  EXPECT_DOUBLE_EQ(m.serial_us(), 3 * 25 + 2 * 200 + 4 * 5000 + 1 * 5000);
}

TEST(SimCostModel, ServersQueueFifo) {
  DeviceModel m(CostConfig{});
  EXPECT_DOUBLE_EQ(m.SsdWrite(0), 200);
  EXPECT_DOUBLE_EQ(m.SsdWrite(0), 400);    // waits for the first
  EXPECT_DOUBLE_EQ(m.SsdRead(1000), 1025);  // idle by then
  EXPECT_DOUBLE_EQ(m.HddRead(BlockKey{0, 0}, 10), 5010);
  EXPECT_DOUBLE_EQ(m.makespan_us(), 5010);
}

TEST(SimCostModel, SsdChannelsServeInParallel) {
  CostConfig c;
  c.ssd_channels = 2;
  DeviceModel m(c);
  EXPECT_DOUBLE_EQ(m.SsdWrite(0), 200);
  EXPECT_DOUBLE_EQ(m.SsdWrite(0), 200);
  EXPECT_DOUBLE_EQ(m.SsdWrite(0), 400);
}

TEST(SimCostModel, PlacementIsPerObjectAndDeterministic) {
  CostConfig c;
  c.data_nodes = 8;
  DeviceModel m(c);
  // 1024 blocks of 4 KiB per 4 MiB object: same object, same node.
  EXPECT_EQ(m.HomeNode(BlockKey{1, 0}), m.HomeNode(BlockKey{1, 1023}));
  std::vector<int> per_node(8, 0);
  for (uint64_t obj = 0; obj < 8000; ++obj) ++per_node[m.HomeNode(BlockKey{2, obj * 1024})];
  for (int n : per_node) EXPECT_NEAR(n, 1000, 150);
  DeviceModel m2(c);
  EXPECT_EQ(m.HomeNode(BlockKey{5, 123456}), m2.HomeNode(BlockKey{5, 123456}));
}

TEST(SimCostModel, SpeedFactorsAndHomeLoad) {
  CostConfig c;
  c.data_nodes = 2;
  c.node_speed = {4, 1};
  DeviceModel m(c);
  BlockKey slow, fast;
  bool have_slow = false, have_fast = false;
  for (uint64_t obj = 0; obj < 64 && !(have_slow && have_fast); ++obj) {
    BlockKey k{0, obj * 1024};
    if (m.HomeNode(k) == 0 && !have_slow) slow = k, have_slow = true;
    if (m.HomeNode(k) == 1 && !have_fast) fast = k, have_fast = true;
  }
  ASSERT_TRUE(have_slow && have_fast);
  EXPECT_DOUBLE_EQ(m.HddWrite(slow, 0), 20000);
  EXPECT_DOUBLE_EQ(m.HddWrite(fast, 0), 5000);
  m.SetNow(1000);
  EXPECT_DOUBLE_EQ(m.HomeLoad(slow), 19000);  // backlog = busy_until - now
  EXPECT_DOUBLE_EQ(m.HomeLoad(fast), 4000);
  m.SetNow(30000);
  EXPECT_DOUBLE_EQ(m.HomeLoad(slow), 0);
}

// LCR's load of a replicated block is its most loaded home's backlog: its destage writes every
// home and finishes with the last.
TEST(SimCostModel, HomeLoadIsTheMostLoadedHome) {
  CostConfig c;
  c.data_nodes = 2;
  c.replicas = 2;
  c.node_speed = {4, 1};
  DeviceModel m(c);
  BlockKey k{0, 0};
  m.SetNow(0);
  EXPECT_DOUBLE_EQ(m.HddWrite(k, 0), 20000);  // both homes written; the slow one ends last
  m.SetNow(1000);
  EXPECT_DOUBLE_EQ(m.HomeLoad(k), 19000);      // not the fast home's 4000
}

TEST(SimCostModel, ReplicasReadLeastLoadedWriteAll) {
  CostConfig c;
  c.data_nodes = 3;
  c.replicas = 2;
  DeviceModel m(c);
  BlockKey k{0, 0};
  EXPECT_DOUBLE_EQ(m.HddWrite(k, 0), 5000);  // both replicas busy until 5000
  uint64_t before = m.node_ops()[0] + m.node_ops()[1] + m.node_ops()[2];
  EXPECT_EQ(before, 2u);
  EXPECT_DOUBLE_EQ(m.serial_us(), 5000);  // one logical write
  EXPECT_DOUBLE_EQ(m.HddRead(k, 0), 10000);
  EXPECT_DOUBLE_EQ(m.HddRead(k, 0), 10000);  // the other replica
}

TEST(SimCostModel, SequentialDiscount) {
  CostConfig c;
  c.hdd_seq_us = 30;
  DeviceModel m(c);
  double t = m.HddWrite(BlockKey{0, 10}, 0);
  EXPECT_DOUBLE_EQ(t, 5000);
  t = m.HddWrite(BlockKey{0, 11}, t);
  EXPECT_DOUBLE_EQ(t, 5030);
  t = m.HddWrite(BlockKey{0, 13}, t);  // a gap: full cost
  EXPECT_DOUBLE_EQ(t, 10030);
  t = m.HddWrite(BlockKey{1, 14}, t);  // other VDI
  EXPECT_DOUBLE_EQ(t, 15030);
}

TEST(SimCostModel, ValidateRejectsNonsense) {
  CostConfig c;
  c.replicas = 2;
  EXPECT_FALSE(c.Validate().ok());
  c = CostConfig{};
  c.node_speed = {0};
  EXPECT_FALSE(c.Validate().ok());
  c = CostConfig{};
  c.ssd_read_us = -1;
  EXPECT_FALSE(c.Validate().ok());
  c = CostConfig{};
  c.object_size = 6000;
  EXPECT_FALSE(c.Validate().ok());
}

}  // namespace
}  // namespace ringcache::sim
