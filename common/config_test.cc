#include "common/config.h"

#include <unistd.h>

#include <fstream>

#include "common/cluster_file.h"
#include "gtest/gtest.h"

namespace ringcache {
namespace {

TEST(ClusterFileTest, ClusterIdIsOptionalAndChecked) {
  const std::string path = ::testing::TempDir() + "/cluster-" + std::to_string(::getpid()) + ".yaml";
  auto load = [&path](const std::string& head) {
    std::ofstream(path) << head
                        << "nodes:\n  - {role: datanode, id: 1, listen: 127.0.0.1:7401}\n";
    return ClusterFile::Load(path);
  };
  auto none = load("");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->cluster_id, "");
  auto named = load("cluster_id: prod-eu_1.a\n");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->cluster_id, "prod-eu_1.a");
  EXPECT_FALSE(load("cluster_id: has space\n").ok());
  EXPECT_FALSE(load("cluster_id: " + std::string(49, 'x') + "\n").ok());
  ::unlink(path.c_str());
}

TEST(ConfigTest, ParsesByteSizes) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("4K"), 4096u);
  EXPECT_EQ(*ParseByteSize("4KiB"), 4096u);
  EXPECT_EQ(*ParseByteSize("10G"), 10ull << 30);
  EXPECT_EQ(*ParseByteSize("1.5GiB"), 3ull << 29);
  EXPECT_FALSE(ParseByteSize("").ok());
  EXPECT_FALSE(ParseByteSize("12Q").ok());
  EXPECT_FALSE(ParseByteSize("-1").ok());
  EXPECT_FALSE(ParseByteSize("0.3").ok());
}

TEST(ConfigTest, ReadsKnownKeysAndRejectsUnknown) {
  YAML::Node n = YAML::Load("a: 5\nname: x\nsub: {b: true, size: 4KiB}\n");
  YamlFields f(n, "test.yaml");
  int64_t a = 0;
  std::string name;
  bool b = false;
  uint64_t size = 0;
  f.Read("a", &a);
  f.Read("name", &name);
  YamlFields sub = f.Sub("sub");
  sub.Read("b", &b);
  sub.ReadSize("size", &size);
  EXPECT_TRUE(f.Finish().ok()) << f.Finish();
  EXPECT_EQ(a, 5);
  EXPECT_EQ(name, "x");
  EXPECT_TRUE(b);
  EXPECT_EQ(size, 4096u);

  YAML::Node bad = YAML::Load("a: 5\nsub: {b: true, typo: 1}\n");
  YamlFields g(bad, "test.yaml");
  g.Read("a", &a);
  YamlFields gs = g.Sub("sub");
  gs.Read("b", &b);
  absl::Status s = g.Finish();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sub.typo"), std::string::npos) << s;
}

TEST(ConfigTest, BadValueNamesKeyAndFile) {
  YAML::Node n = YAML::Load("port: eleven\n");
  YamlFields f(n, "dn.yaml");
  uint32_t port = 0;
  f.Read("port", &port);
  absl::Status s = f.Finish();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("dn.yaml: port"), std::string::npos) << s;
  EXPECT_NE(s.message().find("eleven"), std::string::npos) << s;
}

TEST(ConfigTest, LoadYamlFileErrors) {
  EXPECT_EQ(LoadYamlFile("/nonexistent/x.yaml").status().code(), absl::StatusCode::kNotFound);
  const std::string p = ::testing::TempDir() + "/bad.yaml";
  std::ofstream(p) << "a: [1, 2\n";
  auto r = LoadYamlFile(p);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConfigTest, EnsureWritableDir) {
  EXPECT_TRUE(EnsureWritableDir(::testing::TempDir() + "/ringcache_cfg_dir/x").ok());
  EXPECT_FALSE(EnsureWritableDir("/proc/ringcache_nope").ok());
}

}  // namespace
}  // namespace ringcache
