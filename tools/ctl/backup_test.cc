// The snapshot check of `ringcachectl backup` (tools/ctl/backup.h): a file whose last 32 bytes
// are the SHA-256 of the rest passes; a flipped byte, a cut file or a file too short fail.
#include "tools/ctl/backup.h"

#include <gnutls/crypto.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>


namespace ringcache::ctl {
namespace {

std::string Sha256(const std::string& data) {
  unsigned char digest[32];
  gnutls_hash_fast(GNUTLS_DIG_SHA256, data.data(), data.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
}

TEST(BackupTest, ASnapshotPassesOnlyWithItsOwnChecksum) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/backup_test_etcd.db";
  std::string body(3 << 20, '\0');  // several read buffers' worth
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 131 + (i >> 9));
  WriteFile(path, body + Sha256(body));
  auto ok = VerifySnapshotFile(path);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->size(), 64u);  // hex SHA-256 of the whole file

  std::string rotten = body;
  rotten[12345] ^= 0x10;
  WriteFile(path, rotten + Sha256(body));
  EXPECT_TRUE(absl::IsDataLoss(VerifySnapshotFile(path).status()));

  WriteFile(path, body.substr(0, body.size() - 100) + Sha256(body));  // cut short
  EXPECT_TRUE(absl::IsDataLoss(VerifySnapshotFile(path).status()));

  WriteFile(path, "tiny");
  EXPECT_TRUE(absl::IsDataLoss(VerifySnapshotFile(path).status()));

  EXPECT_FALSE(VerifySnapshotFile(dir + "/backup_test_missing").ok());
}

}  // namespace
}  // namespace ringcache::ctl
