// Cross-process tests of ringcachectl: a real ringcache-local on 127.0.0.1 (ephemeral ports),
// driven by the real ringcachectl binary; output and exit codes are checked as a user or a script
// would see them. Data goes in through NBD with qemu-io so stats and flush have work to show.
// Each test gets its own ringcache-local and data directory, removed afterwards unless it failed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"

namespace ringcache {
namespace {

using testing::DaemonProcess;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

struct CtlResult {
  int code = -1;
  std::string out;  // stdout only
  std::string err;  // stderr only
};

// Returns a TCP port on 127.0.0.1 that nothing listens on (bound, then closed).
int ClosedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  socklen_t len = sizeof(sa);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    ::close(fd);
    return 1;
  }
  ::close(fd);
  return ntohs(sa.sin_port);
}

// Returns the unsigned number after "key": in compact JSON text, or -1 when absent.
long long JsonNumber(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\":([0-9]+)"))) return -1;
  return std::stoll(m[1].str());
}

bool HaveQemuIo() {
  std::string out;
  return testing::RunCommand("command -v qemu-io", &out) == 0;
}

class CtlProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshDir(std::string("ctl-") +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    const std::string ready = dir_ + "/ready.json";
    std::vector<std::string> flags = {"--data-dir", dir_ + "/data", "--create-vdi", "demo:1G",
                                      "--nbd-listen", "127.0.0.1:0", "--admin-listen",
                                      "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
                                      "--ready-file", ready, "--ssd-size", "256M"};
    flags.insert(flags.end(), extra_flags_.begin(), extra_flags_.end());
    ASSERT_TRUE(local_.Start(RINGCACHE_LOCAL_BIN, flags, dir_ + "/local.log"));
    ASSERT_TRUE(local_.WaitReady(ready)) << testing::ReadFile(dir_ + "/local.log");
    gateway_ = "127.0.0.1:" + std::to_string(local_.port("admin_port"));
  }

  void TearDown() override {
    if (local_.running()) {
      const int status = local_.Kill(SIGTERM);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << "ringcache-local did not stop cleanly: " << testing::ReadFile(dir_ + "/local.log");
    }
    if (!HasFailure()) std::filesystem::remove_all(dir_);  // keep logs of failures
  }

  // Runs `ringcachectl --gateway <ours> args` with stdin from /dev/null.
  CtlResult Ctl(const std::string& args) { return CtlRaw("--gateway " + gateway_ + " " + args); }

  // Runs ringcachectl with exactly `args`; `env` is prepended (e.g. "RINGCACHE_GATEWAY=x").
  CtlResult CtlRaw(const std::string& args, const std::string& env = "") {
    const std::string err_file = dir_ + "/ctl.err";
    CtlResult r;
    r.code = testing::RunCommand(
        "{ " + env + " " + RINGCACHE_CTL_BIN + " " + args + " 2>" + err_file + " </dev/null; }",
        &r.out);
    r.err = testing::ReadFile(err_file);
    return r;
  }

  // Runs qemu-io command `cmd` (e.g. "write -P 0x5a 0 1M") against VDI `vdi` over NBD.
  void QemuIo(const std::string& vdi, const std::string& cmd) {
    std::string out;
    const std::string uri =
        "nbd://127.0.0.1:" + std::to_string(local_.port("nbd_port")) + "/" + vdi;
    ASSERT_EQ(testing::RunCommand("qemu-io -f raw -c '" + cmd + "' " + uri, &out), 0) << out;
    ASSERT_THAT(out, Not(HasSubstr("Pattern verification failed"))) << out;
  }

  std::string dir_;
  std::string gateway_;
  DaemonProcess local_;
  std::vector<std::string> extra_flags_;  // more ringcache-local flags (set by a fixture)
};

// Dirty data stays dirty until flushed: no destage when idle.
class CtlProcessNoIdleDestageTest : public CtlProcessTest {
 protected:
  CtlProcessNoIdleDestageTest() {
    extra_flags_ = {"--idle-ops-per-s", "0", "--dirty-age-target-ms", "0"};
  }
};

TEST_F(CtlProcessTest, VdiLifecycle) {
  CtlResult r = Ctl("vdi list");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("NAME"));
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\ndemo +1 +1\\.0 GiB +4\\.0 MiB +4\\.0 KiB +3 "
                                                  "+writeback +0 B +0\\.0% +rw any-identity "
                                                  "+default\n")))
      << r.out;

  r = Ctl("vdi create disk2 --size 10G --object-size 1MiB --replication 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "created VDI disk2 (id 2): size 10.0 GiB, object 1.0 MiB, block 4.0 KiB, "
            "replication 2\n");
  EXPECT_EQ(r.err, "");

  r = Ctl("--json vdi list");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("{\"name\":\"disk2\",\"id\":2,\"size_bytes\":10737418240,"
                               "\"object_size\":1048576,\"block_size\":4096,\"replication\":2,"
                               "\"mode\":\"writeback\",\"policy\":\"\",\"dirty_bytes\":0,"
                               "\"hit_ratio\":0,\"read_only\":false,"
                               "\"public\":false,\"allowed_clients\":[],"
                               "\"read_only_clients\":[],\"qos\":{\"read_iops\":0,"
                               "\"write_iops\":0,\"iops\":0,\"read_bytes_per_s\":0,"
                               "\"write_bytes_per_s\":0,\"bytes_per_s\":0,\"burst_ms\":0,"
                               "\"ssd_min_share\":0,\"ssd_max_share\":0,\"reserve_iops\":0,"
                               "\"reserve_bytes_per_s\":0}}"));
  EXPECT_EQ(r.out.front(), '[');

  // I/O limits (static mode: the gateway's own feature level, 2, allows them).
  r = Ctl("vdi set-qos disk2 --write-iops 500 --read-bps 10M --burst-ms 200");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "VDI disk2: I/O limits and cache share 500 IOPS write, 10.0 MiB/s read, "
                   "burst 200 ms\n");
  r = Ctl("--json vdi list");
  EXPECT_THAT(r.out, HasSubstr("\"qos\":{\"read_iops\":0,\"write_iops\":500,\"iops\":0,"
                               "\"read_bytes_per_s\":10485760,\"write_bytes_per_s\":0,"
                               "\"bytes_per_s\":0,\"burst_ms\":200,\"ssd_min_share\":0,"
                               "\"ssd_max_share\":0,\"reserve_iops\":0,"
                               "\"reserve_bytes_per_s\":0}"));
  r = Ctl("vdi set-qos disk2");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("give at least one limit"));
  // A reservation, alone or under limits; never above the VDI's own IOPS limit.
  r = Ctl("vdi set-qos disk2 --reserve-iops 300 --iops 1000");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "VDI disk2: I/O limits and cache share 1000 IOPS, burst 1000 ms, "
                   "300 IOPS reserved\n");
  r = Ctl("--json vdi list");
  EXPECT_THAT(r.out, HasSubstr("\"ssd_max_share\":0,\"reserve_iops\":300,"
                               "\"reserve_bytes_per_s\":0}"));
  r = Ctl("vdi set-qos disk2 --reserve-iops 2000 --iops 1000");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("reservation of 2000 IOPS is above the VDI's own IOPS limit"));
  r = Ctl("vdi set-qos disk2 --reserve-iops 300 --reserve-bps 20M");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "VDI disk2: I/O limits and cache share 300 IOPS reserved, "
                   "20.0 MiB/s reserved\n");
  r = Ctl("vdi set-qos disk2 --reserve-bps 20M --read-bps 5M --write-bps 5M");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("above the VDI's own bytes/s limit (10485760)"));
  r = Ctl("vdi set-qos nosuch --iops 5");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("no VDI named 'nosuch'"));
  // Cache space: a share of each cache node's SSD, which every cache node takes first.
  r = Ctl("vdi set-qos disk2 --ssd-min 5 --ssd-max 40");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "VDI disk2: I/O limits and cache share at least 5% of each cache node's SSD, "
                   "at most 40% of each cache node's SSD\n");
  r = Ctl("--json vdi list");
  EXPECT_THAT(r.out, HasSubstr("\"burst_ms\":0,\"ssd_min_share\":0.05,\"ssd_max_share\":0.4,"
                               "\"reserve_iops\":0,\"reserve_bytes_per_s\":0}"));
  r = Ctl("vdi set-qos disk2 --ssd-min 50 --ssd-max 40");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("--ssd-min is above --ssd-max"));
  r = Ctl("vdi set-qos demo --ssd-min 90");  // with disk2's 5%: more than reclaim keeps
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("would sum to 0.95"));
  r = Ctl("vdi set-qos disk2 --none");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "VDI disk2: I/O limits and cache share none\n");
  r = Ctl("vdi set-qos demo --ssd-min 90");  // disk2's share is gone: 0.9 fits
  EXPECT_EQ(r.code, 0) << r.err;
  r = Ctl("vdi set-qos demo --none");
  EXPECT_EQ(r.code, 0) << r.err;

  r = Ctl("vdi create disk2 --size 1G");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "ringcachectl: VDI 'disk2' already exists\n");
  EXPECT_EQ(r.out, "");

  r = Ctl("vdi resize disk2 --size 20G");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "resized VDI disk2 to 20.0 GiB (21474836480 bytes)\n");

  r = Ctl("vdi set-mode disk2 writethrough");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "VDI disk2: cache mode writethrough\n");
  r = Ctl("vdi list");
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\ndisk2 +2 +20\\.0 GiB .* writethrough +0 B +0\\.0% +rw any-identity "
                                "+default\n")))
      << r.out;

  // NBD access: an access list and read-only, shown by vdi list, then undone.
  r = Ctl("vdi access disk2 --allow alice,bob --read-only on");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "VDI disk2: access ro alice,bob\n");
  r = Ctl("vdi list");
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\ndisk2 .* ro alice,bob +default\n"))) << r.out;
  // A per-VDI cache policy, switched live, shown by vdi list and stats, then undone.
  r = Ctl("vdi set-policy disk2 'arc + sieve'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "VDI disk2: cache policy arc + sieve\n");
  r = Ctl("vdi list");
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\ndisk2 .* arc\\+sieve\n"))) << r.out;
  r = Ctl("--json stats --vdi disk2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"policy\":\"arc+sieve\""));
  r = Ctl("vdi set-policy disk2 uarc");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("complete policy"));
  r = Ctl("vdi set-policy disk2 'lru+nonsense'");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("unknown policy component 'nonsense'"));
  r = Ctl("vdi set-policy disk2 default");
  ASSERT_EQ(r.code, 0) << r.err;
  r = Ctl("--json stats --vdi disk2");
  EXPECT_THAT(r.out, HasSubstr("\"policy\":\"vbq(share=utility)+arc+sieve(freq=1,region_adapt=1,seen=1,writes=1)+lcr\""));

  r = Ctl("vdi access disk2 --allow 'bad id'");
  EXPECT_EQ(r.code, 1);
  r = Ctl("vdi access disk2 --allow-any --read-only off");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "VDI disk2: access rw any-identity\n");
  r = Ctl("--json stats --vdi disk2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"vdi\":\"disk2\",\"mode\":\"writethrough\""));

  // No terminal to ask and no --yes: refused as a usage error, and the VDI stays.
  r = Ctl("vdi delete disk2");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("refusing to delete VDI 'disk2' without --yes"));
  EXPECT_THAT(Ctl("vdi list").out, HasSubstr("disk2"));

  r = Ctl("vdi delete disk2 --yes");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "deleted VDI disk2\n");
  EXPECT_THAT(Ctl("vdi list").out, Not(HasSubstr("disk2")));
  r = Ctl("vdi delete disk2 -y");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "ringcachectl: no VDI named 'disk2'\n");
}

TEST_F(CtlProcessTest, ErrorsFromTheGatewayExitOne) {
  for (const std::string cmd : {"vdi resize nope --size 2G", "vdi set-mode nope passthrough",
                                "vdi delete nope --yes", "stats --vdi nope", "flush --vdi nope"}) {
    CtlResult r = Ctl(cmd);
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_EQ(r.err, "ringcachectl: no VDI named 'nope'\n") << cmd;
  }
  CtlResult r = Ctl("vdi create odd --size 1000");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("size 1000 must be a positive multiple of 4096"));
  r = Ctl("vdi create wide --size 1G --replication 9");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("replication 9 needs at least that many data nodes"));
  EXPECT_THAT(Ctl("vdi list").out, Not(HasSubstr("wide")));
}

TEST_F(CtlProcessTest, UsageErrorsExitTwo) {
  CtlResult r = Ctl("vdi create big --size 10X");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("'10X' is not a byte size"));
  EXPECT_THAT(r.err, HasSubstr("--object-size"));  // usage of `vdi create`
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(Ctl("vdi set-mode demo turbo").code, 2);
  EXPECT_EQ(Ctl("frobnicate").code, 2);
  EXPECT_EQ(Ctl("").code, 2);
  EXPECT_THAT(Ctl("vdi list").out, Not(HasSubstr("big")));

  r = Ctl("vdi --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("set-mode"));
}

TEST_F(CtlProcessTest, UnreachableGatewayExitsOne) {
  const std::string addr = "127.0.0.1:" + std::to_string(ClosedPort());
  for (const std::string cmd : {"status", "vdi list", "flush"}) {
    CtlResult r = CtlRaw("--gateway " + addr + " " + cmd);
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_THAT(r.err, HasSubstr("ringcachectl: cannot reach gateway at " + addr + ": ")) << cmd;
    EXPECT_EQ(r.out, "") << cmd;
  }
  // RINGCACHE_GATEWAY is used without --gateway, and --gateway wins over it.
  CtlResult r = CtlRaw("status", "RINGCACHE_GATEWAY=" + addr);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot reach gateway at " + addr));
  r = CtlRaw("status", "RINGCACHE_GATEWAY=" + gateway_);
  EXPECT_EQ(r.code, 0) << r.err;
  r = CtlRaw("--gateway " + gateway_ + " status", "RINGCACHE_GATEWAY=" + addr);
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST_F(CtlProcessTest, NodesAndStatus) {
  CtlResult r = Ctl("node list");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("^ROLE +ID +ADDRESS +CAPACITY +SSD_USED +DIRTY +HIT% +WRITTEN +BUDGET "
                        "+LIFE +ZONE +RELEASE +STATE\n")))
      << r.out;
  // SSD used, dirty, hit ratio and SSD wear come from the health watch's first round ("-"
  // before it); no write budget: "none".
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("\ncachenode +2 +in-process +256\\.0 MiB +(-|[0-9.]+ [KMG]?i?B) "
                        "+(-|[0-9.]+ [KMG]?i?B) +(-|[0-9.]+%) +(-|[0-9.]+ [KMG]?i?B) +(-|none) "
                        "+- +- +- +up\n")))
      << r.out;
  EXPECT_TRUE(std::regex_search(
      r.out,
      std::regex("\ndatanode +3 +127\\.0\\.0\\.1:[0-9]+ +- +- +- +- +- +- +- +- +- +up")))
      << r.out;

  r = Ctl("node list --json");  // global options also after the command
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("{\"role\":\"cachenode\",\"id\":1,\"address\":\"in-process\","
                               "\"capacity_bytes\":268435456,\"zone\":\"\",\"state\":\"up\""));

  // Static mode: no node registers, so none says its release.
  r = Ctl("cluster version");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("^RELEASE +NODES +WHICH\nunknown \\(before 0\\.2\\.0, or static mode\\) +5 +"
                        "cachenode 1, cachenode 2, datanode 1, datanode 2, datanode 3\n"
                        "no node says its release .*\nfeature level 3 \\(static mode: this "
                        "gateway's release\\)\nringcachectl [0-9]+\\.[0-9]+\\.[0-9]+; formats: "
                        "slot-file")))
      << r.out;
  r = Ctl("--json cluster version");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"uniform\":false,\"feature_level\":3,\"max_feature_level\":3,"
                               "\"cluster_mode\":false,\"releases\":{\"unknown\":[\"cachenode 1\","));
  r = Ctl("cluster finalize");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("static mode: no cluster-wide level to raise"));

  r = Ctl("status");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "health:      OK\n"
            "epoch:       1\n"
            "nodes:       5 (2 cachenode, 3 datanode); 5 up\n"
            "cache ring:  1 (1), 2 (1)\n"
            "VDIs:        1\n"
            "dirty:       0 B\n"
            "rebalance:   idle (data ring 1,2,3, epoch 0)\n");
  r = Ctl("--json status");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(JsonNumber(r.out, "epoch"), 1);
  EXPECT_EQ(JsonNumber(r.out, "vdis"), 1);
  EXPECT_EQ(JsonNumber(r.out, "dirty_bytes"), 0);
  EXPECT_THAT(r.out, HasSubstr("\"rebalance\":{\"state\":\"idle\",\"data_epoch\":0,"
                               "\"members\":[1,2,3],\"target\":[]"));

  // Single-process mode has a fixed data ring: removing (decommissioning) a data node, or
  // taking one out, is refused with the reason, and the user sees it.
  r = Ctl("node remove 2 --role datanode");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("ringcachectl: data nodes cannot be taken out, put in or "
                               "decommissioned here"));
  r = Ctl("datanode out 2");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("single-process mode has a fixed data ring"));
  r = Ctl("node remove 99");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("no cache node 99"));
}

TEST_F(CtlProcessTest, StatsAndFlushAfterNbdWrites) {
  if (!HaveQemuIo()) GTEST_SKIP() << "qemu-io not installed";
  ASSERT_NO_FATAL_FAILURE(QemuIo("demo", "write -P 0x5a 0 1M"));
  ASSERT_NO_FATAL_FAILURE(QemuIo("demo", "read -P 0x5a 0 1M"));

  CtlResult r = Ctl("stats --vdi demo");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("^VDI +MODE +HIT% +RAM_HITS +SSD_HITS +MISSES +BYPASSED +QUEUE +L_m +U_i "
                        "+D_i +DIRTY +DIRTY_AGE +ADMISSION +POLICY\n")))
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\ndemo +writeback +[0-9.]+% "))) << r.out;
  // vdi list shows the dirty bytes (1 MiB written back, not destaged yet: at most that much)
  // and the hit ratio (the read hit every block).
  r = Ctl("vdi list");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("\ndemo +1 .* writeback +[0-9.]+ [KM]?i?B +[1-9][0-9.]*% +rw")))
      << r.out;

  r = Ctl("--json stats");
  ASSERT_EQ(r.code, 0) << r.err;
  // 256 blocks of 4 KiB were written and read back: every read was served by the cache.
  const long long hits = JsonNumber(r.out, "hits_ram") + JsonNumber(r.out, "hits_ssd");
  EXPECT_GE(hits, 256) << r.out;
  EXPECT_GT(JsonNumber(r.out, "queue_length"), 0) << r.out;
  // U_i averages over the cache nodes that hold a queue for the VDI (paper 002 bounds: 0.9-0.95),
  // not over every node.
  EXPECT_THAT(r.out, HasSubstr("\"upper_bound\":0.9")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"hit_ratio\":"));

  r = Ctl("flush --vdi demo --wait");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("^flush of VDI demo: [0-9.]+ [KMG]?i?B dirty left, [0-9.]+% done, "
                        "[0-9.]+ [KMG]?i?B/s, ETA ([0-9hms]+|-)\n")))
      << r.out;
  EXPECT_THAT(r.out, HasSubstr("flush of VDI demo: done\n"));

  r = Ctl("--json flush");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("\\{\"dirty_bytes_left\":[0-9]+,\"dirty_blocks_left\":[0-9]+,"
                        "\"bytes_per_second\":[-0-9.e+]+,\"percent_done\":100,"
                        "\"eta_seconds\":0,\"done\":true\\}\n$")))
      << r.out;

  // After a completed flush and no new writes, nothing is dirty.
  r = Ctl("status");
  EXPECT_THAT(r.out, HasSubstr("dirty:       0 B\n"));
  r = Ctl("--json stats --vdi demo");
  EXPECT_EQ(JsonNumber(r.out, "dirty_bytes"), 0) << r.out;
}

TEST_F(CtlProcessNoIdleDestageTest, InvalidateDrainUndrainAndNodeUsage) {
  if (!HaveQemuIo()) GTEST_SKIP() << "qemu-io not installed";
  ASSERT_NO_FATAL_FAILURE(QemuIo("demo", "write -P 0x6b 0 1M"));

  // node list: the cache nodes' SSD use, dirty bytes and hit ratio, once the gateway's health
  // watch (every second) heard from them after the write.
  CtlResult r;
  uint64_t used = 0, dirty = 0;
  for (int i = 0; i < 100 && dirty < (1u << 20); ++i) {
    r = Ctl("--json node list");
    ASSERT_EQ(r.code, 0) << r.err;
    used = dirty = 0;
    std::smatch m;
    std::string rest = r.out;
    while (std::regex_search(rest, m, std::regex("\"ssd_used_bytes\":([0-9]+),\"dirty_bytes\":"
                                                 "([0-9]+),\"hit_ratio\":"))) {
      used += std::stoull(m[1].str());
      dirty += std::stoull(m[2].str());
      rest = m.suffix();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(dirty, 1u << 20) << r.out;
  EXPECT_GE(used, 1u << 20) << r.out;
  // stats: how long the oldest dirty block has waited (at least as long as we waited here).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  r = Ctl("--json stats --vdi demo");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_GE(JsonNumber(r.out, "oldest_dirty_ms"), 300) << r.out;
  r = Ctl("stats --vdi demo");
  EXPECT_TRUE(std::regex_search(r.out, std::regex(" [0-9]+\\.[0-9] s +(-|bar [0-9.]+) +vbq")))
      << r.out;

  // Dirty data is the only copy: invalidate refuses it unless asked to destage first.
  r = Ctl("vdi invalidate demo");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("dirty bytes in the cache nodes, the only copy of that data"));
  EXPECT_THAT(r.err, HasSubstr("--flush"));
  r = Ctl("vdi invalidate demo --flush");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "VDI demo: 256 clean cached blocks dropped on 2 cache nodes\n");
  r = Ctl("--json vdi invalidate demo");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"vdi\":\"demo\",\"dropped_blocks\":0,\"dirty_blocks_kept\":0,"
                   "\"cache_nodes\":2}\n");
  ASSERT_NO_FATAL_FAILURE(QemuIo("demo", "read -P 0x6b 0 1M"));  // from the data nodes
  r = Ctl("--json stats --vdi demo");
  EXPECT_EQ(JsonNumber(r.out, "oldest_dirty_ms"), 0) << r.out;
  r = Ctl("vdi invalidate nosuch");
  EXPECT_EQ(r.code, 1);

  // Undrain: refused for a node in the ring, an unknown one, a data node; a drained node comes
  // back and serves (the data written before reads back through it).
  r = Ctl("node undrain 1");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("cache node 1 is in the ring: nothing to undrain"));
  r = Ctl("node undrain 99");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("no cache node 99"));
  r = Ctl("node undrain 2 --role datanode");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("ringcachectl datanode in"));
  ASSERT_NO_FATAL_FAILURE(QemuIo("demo", "write -P 0x7c 1M 1M"));
  r = Ctl("node drain 2");
  ASSERT_EQ(r.code, 0) << r.err;
  r = Ctl("--json node list");
  EXPECT_THAT(r.out, HasSubstr("\"id\":2,\"address\":\"in-process\",\"capacity_bytes\":"
                               "268435456,\"zone\":\"\",\"state\":\"removed\""));
  ASSERT_NO_FATAL_FAILURE(QemuIo("demo", "read -P 0x7c 1M 1M"));
  r = Ctl("node undrain 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "cache node 2: back in the ring\n");
  r = Ctl("--json node list");
  EXPECT_THAT(r.out, HasSubstr("\"id\":2,\"address\":\"in-process\",\"capacity_bytes\":"
                               "268435456,\"zone\":\"\",\"state\":\"up\""));
  ASSERT_NO_FATAL_FAILURE(QemuIo("demo", "read -P 0x6b 0 1M"));
  ASSERT_NO_FATAL_FAILURE(QemuIo("demo", "read -P 0x7c 1M 1M"));
  ASSERT_NO_FATAL_FAILURE(QemuIo("demo", "write -P 0x8d 0 2M"));
  ASSERT_NO_FATAL_FAILURE(QemuIo("demo", "read -P 0x8d 0 2M"));

  // The VDI's admission state: an adaptive sieve says the share of first read misses it admits
  // (a fraction; the climber starts at one half and lowers it on a scan like this one).
  r = Ctl("--json stats --vdi demo");
  EXPECT_THAT(r.out, Not(HasSubstr("admit_first"))) << r.out;
  r = Ctl("vdi set-policy demo 'lru+sieve(adapt=1)'");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_NO_FATAL_FAILURE(QemuIo("demo", "read -P 0 4M 1M"));  // never written: read misses
  r = Ctl("--json stats --vdi demo");
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\"admit_first\":(0|1|0\\.[0-9]+)[,}]")))
      << r.out;
  r = Ctl("stats --vdi demo");
  EXPECT_TRUE(std::regex_search(r.out, std::regex(" [0-9.]+% first +lru\\+sieve"))) << r.out;

  // A drained node's SSD tier resized: the tier changes; its ring weight waits until it is back.
  r = Ctl("node drain 2");
  ASSERT_EQ(r.code, 0) << r.err;
  r = Ctl("node resize 2 --ssd 512M");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("ring weight unchanged: cache node 2 is out of the cache ring; "
                               "once it is back, the same resize moves its weight to 2"));
  EXPECT_THAT(r.out, EndsWith(", ring weight 1\n"));
}

// `node resize`: a cache node's SSD tier grows and shrinks while the VDI is served; a shrink
// below what the node holds moves its blocks out (dirty ones home first) and nothing written is
// lost; `node list` shows the new size; bad ids and sizes are refused with a message.
TEST_F(CtlProcessTest, NodeResizeGrowsAndShrinksTheTiersWhileServing) {
  if (!HaveQemuIo()) GTEST_SKIP() << "qemu-io not installed";
  CtlResult r = Ctl("node resize 1 --ssd 512M");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("cache node 1: SSD tier is 512.0 MiB, RAM tier 64.0 MiB ("));
  // Twice its configured 256 MiB: twice its registered weight in the cache ring.
  EXPECT_THAT(r.out, EndsWith(", ring weight 2\n"));
  r = Ctl("status");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("cache ring:  1 (2), 2 (1)\n")) << r.out;
  ASSERT_NO_FATAL_FAILURE(QemuIo("demo", "write -P 0x3c 0 48M"));
  // 16 MiB holds 4,096 blocks: fewer than the ~6,000 of its half of the writes (write-back:
  // dirty), so blocks leave the released slots by destage. The RAM tier shrinks with it.
  for (const char* id : {"1", "2"}) {
    r = Ctl(std::string("node resize ") + id + " --ssd 16M --ram 2M");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_THAT(r.out, StartsWith(std::string("cache node ") + id +
                                  ": SSD tier is 16.0 MiB, RAM tier 2.0 MiB ("));
  }
  ASSERT_NO_FATAL_FAILURE(QemuIo("demo", "read -P 0x3c 0 48M"));
  ASSERT_NO_FATAL_FAILURE(QemuIo("demo", "write -P 0x4d 8M 8M"));
  ASSERT_NO_FATAL_FAILURE(QemuIo("demo", "read -P 0x4d 8M 8M"));
  r = Ctl("--json node resize 1 --ssd 16M");  // no change: where it stands
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("{\"id\":1,\"ssd_bytes\":16777216,\"file_bytes\":16777216,"
                                "\"target_bytes\":0,\"blocks_to_move\":0,"
                                "\"ram_bytes\":2097152,\"ram_used_bytes\":"));
  // 16 of 256 MiB: 0.0625, to a thousandth.
  EXPECT_THAT(r.out, HasSubstr(",\"ring_weight\":0.063,\"ring_weight_note\":\"\"}"));
  r = Ctl("--json status");
  EXPECT_THAT(r.out, HasSubstr("\"cache_ring\":[{\"id\":1,\"weight\":0.063},"
                               "{\"id\":2,\"weight\":0.063}]"));
  EXPECT_LE(JsonNumber(r.out, "ram_used_bytes"), 2097152);
  r = Ctl("node resize 2 --ram 32M");  // a larger RAM tier alone
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("cache node 2: SSD tier is 16.0 MiB, RAM tier 32.0 MiB ("));
  ASSERT_NO_FATAL_FAILURE(QemuIo("demo", "read -P 0x4d 8M 8M"));
  bool listed = false;  // the health watch's next round
  for (int i = 0; i < 300 && !listed; ++i) {
    r = Ctl("--json node list");
    listed = r.out.find("\"id\":1,\"address\":\"in-process\",\"capacity_bytes\":16777216,") !=
             std::string::npos;
    if (!listed) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(listed) << r.out;

  r = Ctl("node resize 9 --ssd 1G");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("no cache node 9"));
  r = Ctl("node resize 1 --ssd 64K");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("too small"));
  r = Ctl("node resize 1 --ram 1K");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("holds no block"));
  r = Ctl("node resize 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("give --ssd SIZE, --ram SIZE or both"));
  r = Ctl("node resize 1 --ram 0");  // not "no change": a size must be positive
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("'0' is zero"));
  // --keep-weight: the tier changes, the ring does not; the next resize without it catches up.
  r = Ctl("node resize 2 --ssd 64M --keep-weight");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("SSD tier is 64.0 MiB"));
  EXPECT_THAT(r.out, EndsWith(", ring weight 0.063\n"));
  r = Ctl("node resize 2 --ssd 64M");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, EndsWith(", ring weight 0.25\n"));
  ASSERT_NO_FATAL_FAILURE(QemuIo("demo", "read -P 0x4d 8M 8M"));
}

}  // namespace
}  // namespace ringcache
