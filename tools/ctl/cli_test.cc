// Tests of ringcachectl's command line that need no gateway: --help at every level, usage
// errors (exit 2 with the usage text), and the delete confirmation. Commands against a real
// gateway are exercised in ctl_process_test.cc.
#include "tools/ctl/cli.h"

#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringcache::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

Result RunCli(std::vector<std::string> args, const std::string& stdin_text = "",
              bool terminal = false) {
  args.insert(args.begin(), "ringcachectl");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  CtlIo io{&in, &out, &err, terminal};
  Result r;
  r.code = RunCtl(static_cast<int>(argv.size()), argv.data(), io);
  r.out = out.str();
  r.err = err.str();
  return r;
}

TEST(CtlCliTest, HelpAtTheTopListsEveryCommand) {
  Result r = RunCli({"--help"});
  EXPECT_EQ(r.code, kExitOk);
  for (const char* word : {"vdi", "node", "status", "stats", "flush", "--gateway", "--json",
                           "RINGCACHE_GATEWAY", "Exit status"}) {
    EXPECT_THAT(r.out, HasSubstr(word));
  }
}

TEST(CtlCliTest, HelpAtEveryLevel) {
  EXPECT_THAT(RunCli({"vdi", "--help"}).out, HasSubstr("set-mode"));
  EXPECT_THAT(RunCli({"vdi", "--help"}).out, HasSubstr("set-policy"));
  EXPECT_THAT(RunCli({"vdi", "set-policy", "--help"}).out, HasSubstr("'default'"));
  EXPECT_THAT(RunCli({"node", "--help"}).out, HasSubstr("drain"));
  Result create = RunCli({"vdi", "create", "--help"});
  EXPECT_EQ(create.code, kExitOk);
  EXPECT_THAT(create.out, HasSubstr("--object-size"));
  EXPECT_THAT(create.out, HasSubstr("--replication"));
  EXPECT_THAT(RunCli({"vdi", "set-mode", "--help"}).out, HasSubstr("writearound"));
  EXPECT_THAT(RunCli({"node", "remove", "--help"}).out, HasSubstr("--role"));
  EXPECT_THAT(RunCli({"stats", "--help"}).out, HasSubstr("--vdi"));
  EXPECT_THAT(RunCli({"flush", "--help"}).out, HasSubstr("--wait"));
}

TEST(CtlCliTest, VersionFlag) {
  Result r = RunCli({"--version"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_THAT(r.out, HasSubstr("ringcachectl 0.2.0"));
}

TEST(CtlCliTest, MissingCommandIsAUsageError) {
  Result r = RunCli({});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("ringcachectl: "));
  EXPECT_THAT(r.err, HasSubstr("Subcommands:"));
  EXPECT_EQ(RunCli({"vdi"}).code, kExitUsage);
  EXPECT_EQ(RunCli({"node"}).code, kExitUsage);
  EXPECT_EQ(RunCli({"frobnicate"}).code, kExitUsage);
}

TEST(CtlCliTest, BadSizeIsAUsageErrorNamingTheText) {
  Result r = RunCli({"vdi", "create", "d", "--size", "10X"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("'10X' is not a byte size"));
  EXPECT_THAT(r.err, HasSubstr("--object-size"));  // the usage of `vdi create` follows
  EXPECT_THAT(r.out, IsEmpty());

  EXPECT_THAT(RunCli({"vdi", "create", "d", "--size", "0"}).err, HasSubstr("zero"));
  EXPECT_THAT(RunCli({"vdi", "create", "d", "--size", "1G", "--object-size", "8G"}).err,
              HasSubstr("larger than 4 GiB - 1"));
  EXPECT_EQ(RunCli({"vdi", "resize", "d", "--size", "big"}).code, kExitUsage);
}

TEST(CtlCliTest, MissingArgumentsAreUsageErrors) {
  EXPECT_EQ(RunCli({"vdi", "create", "d"}).code, kExitUsage);             // no --size
  EXPECT_EQ(RunCli({"vdi", "create", "--size", "1G"}).code, kExitUsage);  // no NAME
  EXPECT_EQ(RunCli({"vdi", "resize", "d"}).code, kExitUsage);
  EXPECT_EQ(RunCli({"vdi", "set-mode", "d"}).code, kExitUsage);
  EXPECT_EQ(RunCli({"node", "drain"}).code, kExitUsage);
}

TEST(CtlCliTest, BadValuesAreUsageErrors) {
  EXPECT_EQ(RunCli({"vdi", "set-mode", "d", "fastest"}).code, kExitUsage);
  EXPECT_EQ(RunCli({"node", "drain", "abc"}).code, kExitUsage);
  EXPECT_EQ(RunCli({"node", "remove", "1", "--role", "toaster"}).code, kExitUsage);
  EXPECT_EQ(RunCli({"vdi", "create", "d", "--size", "1G", "--replication", "0"}).code, kExitUsage);
  EXPECT_EQ(RunCli({"--timeout", "-1", "status"}).code, kExitUsage);
  EXPECT_EQ(RunCli({"vdi", "list", "extra"}).code, kExitUsage);
}

TEST(CtlCliTest, DeleteWithoutYesAndWithoutTerminalRefuses) {
  Result r = RunCli({"vdi", "delete", "demo"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("without --yes"));
}

TEST(CtlCliTest, DeleteDeclinedAtThePromptDoesNothing) {
  // The answer "n" stops before any connection is made, so no gateway is needed.
  Result r = RunCli({"--gateway", "unused.invalid:1", "vdi", "delete", "demo"}, "n\n", true);
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_THAT(r.err, HasSubstr("Delete VDI 'demo' and all its data? [y/N]"));
  EXPECT_THAT(r.err, HasSubstr("not deleted"));
  EXPECT_EQ(RunCli({"vdi", "delete", "demo"}, "", true).code, kExitFailed);  // end of input
}

TEST(CtlCliTest, EtcdCommandsNeedEndpointsAndAnAdminCertificate) {
  EXPECT_THAT(RunCli({"etcd", "--help"}).out, HasSubstr("enable-auth"));
  EXPECT_THAT(RunCli({"etcd", "add-user", "--help"}).out, HasSubstr("--role"));
  Result no_etcd = RunCli({"etcd", "enable-auth"});
  EXPECT_EQ(no_etcd.code, kExitUsage);
  EXPECT_THAT(no_etcd.err, HasSubstr("--etcd"));
  Result no_cert = RunCli({"--etcd", "127.0.0.1:1", "etcd", "add-user", "--role", "gateway", "g"});
  EXPECT_EQ(no_cert.code, kExitUsage);
  EXPECT_THAT(no_cert.err, HasSubstr("--tls-dir"));
  // NBD clients get no etcd role at all.
  EXPECT_EQ(RunCli({"--etcd", "127.0.0.1:1", "etcd", "add-user", "--role", "client", "hv"}).code,
            kExitUsage);
}

TEST(CtlCliTest, BackupAndRestoreNeedEndpointsAndADirectory) {
  EXPECT_THAT(RunCli({"backup", "--help"}).out, HasSubstr("etcd"));
  EXPECT_THAT(RunCli({"restore", "--help"}).out, HasSubstr("--dry-run"));
  EXPECT_EQ(RunCli({"backup"}).code, kExitUsage) << "no directory";
  Result no_etcd = RunCli({"backup", ::testing::TempDir() + "/cli_test_backup"});
  EXPECT_EQ(no_etcd.code, kExitUsage);
  EXPECT_THAT(no_etcd.err, HasSubstr("backup needs --etcd"));
  Result not_a_backup =
      RunCli({"--etcd", "127.0.0.1:1", "restore", ::testing::TempDir() + "/cli_test_nothing"});
  EXPECT_EQ(not_a_backup.code, kExitUsage);
  EXPECT_THAT(not_a_backup.err, HasSubstr("is not a ringcache backup"));
}

}  // namespace
}  // namespace ringcache::ctl
