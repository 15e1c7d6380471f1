#include "common/file.h"

#include "common/atomic_file.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <sys/uio.h>
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

// State files are neither read nor written through a symbolic link: one planted at a state
// file's name, or at its ".tmp" name, cannot point ringcache at another file. Credentials are
// still read through links (secret volumes of container platforms are links).
TEST(FileTest, StateFilesAreNotFollowedThroughLinks) {
  namespace fs = std::filesystem;
  const std::string victim = TempPath("victim"), state = TempPath("state");
  for (const std::string& p : {victim, state, state + ".tmp"}) fs::remove(p);
  ASSERT_TRUE(WriteFileAtomically(victim, "precious\n").ok());
  fs::create_symlink(victim, state);
  absl::StatusOr<std::string> read = ReadStateFile(state);
  EXPECT_TRUE(absl::IsFailedPrecondition(read.status())) << read.status();
  EXPECT_NE(read.status().message().find("symbolic link"), std::string::npos);
  EXPECT_EQ(*ReadSmallFile(state), "precious\n");
  EXPECT_TRUE(absl::IsNotFound(ReadStateFile(TempPath("none")).status()));
  // A link planted at the temporary name is replaced, not written through; the state file's
  // link is replaced by the file itself.
  fs::create_symlink(victim, state + ".tmp");
  ASSERT_TRUE(WriteFileAtomically(state, "new state\n").ok());
  EXPECT_EQ(*ReadSmallFile(victim), "precious\n");
  EXPECT_FALSE(fs::is_symlink(state));
  EXPECT_EQ(*ReadStateFile(state), "new state\n");
  for (const std::string& p : {victim, state}) fs::remove(p);
}

// A scatter read fills its buffers in order, from the posix file (preadv) and from a wrapper
// that uses the default (one PRead per buffer, seeing the wrapper's unsynced writes).
TEST(FileTest, ScatterReadFillsBuffersInOrder) {
  auto f = OpenPosixFile(TempPath("scatter"), true);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE((*f)->Preallocate(3 * 4096).ok());
  std::string all;
  for (char c : {'a', 'b', 'c'}) all += std::string(4096, c);
  ASSERT_TRUE((*f)->PWrite(all.data(), all.size(), 0).ok());
  std::string x(4096, 0), y(100, 0), z(4096 - 100 + 4096, 0);
  struct iovec iov[3] = {{x.data(), x.size()}, {y.data(), y.size()}, {z.data(), z.size()}};
  ASSERT_TRUE((*f)->PReadV(iov, 3, 0).ok());
  EXPECT_EQ(x + y + z, all);
  struct iovec past[1] = {{x.data(), x.size()}};
  EXPECT_TRUE(absl::IsOutOfRange((*f)->PReadV(past, 1, 2 * 4096 + 1)));

  FaultInjectionFile wrapped(std::move(*f));
  ASSERT_TRUE(wrapped.PWrite("zz", 2, 4096).ok());  // not synced: only the wrapper has it
  std::string p(4096, 0), q(4096, 0);
  struct iovec two[2] = {{p.data(), p.size()}, {q.data(), q.size()}};
  ASSERT_TRUE(wrapped.PReadV(two, 2, 0).ok());
  EXPECT_EQ(p, std::string(4096, 'a'));
  EXPECT_EQ(q, "zz" + std::string(4094, 'b'));
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
