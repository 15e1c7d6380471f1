#include "common/file.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <unistd.h>

namespace ringcache {
namespace {

std::string TempPath(const char* name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/file_test_" + name + "_" +
         std::to_string(::getpid());
}

TEST(FileTest, PosixRoundTrip) {
  auto f = OpenPosixFile(TempPath("posix"), true);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE((*f)->Preallocate(8192).ok());
  EXPECT_EQ(*(*f)->Size(), 8192u);
  ASSERT_TRUE((*f)->PWrite("hello", 5, 100).ok());
  ASSERT_TRUE((*f)->Sync().ok());
  char buf[5];
  ASSERT_TRUE((*f)->PRead(buf, 5, 100).ok());
  EXPECT_EQ(std::string(buf, 5), "hello");
  EXPECT_TRUE(absl::IsOutOfRange((*f)->PRead(buf, 5, 8190)));
}

TEST(FileTest, FaultInjectionDropsUnsyncedAndFailedSyncWrites) {
  auto base = OpenPosixFile(TempPath("fault"), true);
  ASSERT_TRUE(base.ok());
  ASSERT_TRUE((*base)->Preallocate(4096).ok());
  FaultInjectionFile f(*std::move(base));
  char buf[3];
  ASSERT_TRUE(f.PWrite("aaa", 3, 0).ok());
  ASSERT_TRUE(f.Sync().ok());
  ASSERT_TRUE(f.PWrite("bbb", 3, 0).ok());
  ASSERT_TRUE(f.PRead(buf, 3, 0).ok());
  EXPECT_EQ(std::string(buf, 3), "bbb");  // visible before sync (page cache)
  f.DropUnsynced();
  ASSERT_TRUE(f.PRead(buf, 3, 0).ok());
  EXPECT_EQ(std::string(buf, 3), "aaa");  // a crash before fdatasync loses it

  // A failed fdatasync loses what it covered; the retry "succeeds" without it (Linux).
  ASSERT_TRUE(f.PWrite("ccc", 3, 0).ok());
  f.FailNextSyncs(1);
  EXPECT_FALSE(f.Sync().ok());
  EXPECT_TRUE(f.Sync().ok());
  ASSERT_TRUE(f.PRead(buf, 3, 0).ok());
  EXPECT_EQ(std::string(buf, 3), "aaa");

  f.FailWrites(true);
  EXPECT_FALSE(f.PWrite("ddd", 3, 0).ok());
}

}  // namespace
}  // namespace ringcache
