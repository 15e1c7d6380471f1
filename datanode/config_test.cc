#include "datanode/config.h"

#include <fstream>

#include "gtest/gtest.h"

namespace ringcache::datanode {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string p = ::testing::TempDir() + "/" + name;
  std::ofstream(p) << text;
  return p;
}

TEST(DataNodeConfigTest, LoadsAllKeys) {
  DataNodeConfig c;
  const std::string dir = ::testing::TempDir() + "/dn_cfg_data";
  ASSERT_TRUE(c.LoadYaml(WriteTemp("dn.yaml", "node_id: 4\nlisten: 127.0.0.1:0\n"
                                               "data_dir: " + dir + "\n"
                                               "log_limit_bytes: 1GiB\nzone: z1\n"
                                               "hdd_emulation: {enabled: true, seek_ms: 2}\n"))
                  .ok());
  EXPECT_EQ(c.node_id, 4u);
  EXPECT_EQ(c.log_limit_bytes, 1ull << 30);
  EXPECT_TRUE(c.hdd.enabled);
  EXPECT_EQ(c.hdd.seek_ms, 2.0);
  EXPECT_TRUE(c.Validate().ok()) << c.Validate();
}

TEST(DataNodeConfigTest, UnknownKeyAndBadValueAreErrors) {
  DataNodeConfig c;
  absl::Status s = c.LoadYaml(WriteTemp("dn2.yaml", "node_id: 1\nlisten_addr: x\n"));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("listen_addr"), std::string::npos) << s;
  s = c.LoadYaml(WriteTemp("dn3.yaml", "node_id: -3\n"));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("node_id"), std::string::npos) << s;
  DataNodeConfig d;
  d.listen = "nonsense";
  EXPECT_FALSE(d.Validate().ok());
  DataNodeConfig e;
  e.data_dir = "/proc/not-writable";
  EXPECT_FALSE(e.Validate().ok());
}

}  // namespace
}  // namespace ringcache::datanode
