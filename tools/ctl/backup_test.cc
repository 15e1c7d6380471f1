// The snapshot check of `ringcachectl backup` (tools/ctl/backup.h): a file whose last 32 bytes
// are the SHA-256 of the rest passes; a flipped byte, a cut file or a file too short fail.
#include "tools/ctl/backup.h"

#include <gnutls/crypto.h>
#include <gtest/gtest.h>

#include <filesystem>
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

TEST(BackupTest, AManifestOfAnotherFormatVersionIsRefusedNamingTheVersions) {
  const std::string dir = ::testing::TempDir() + "/backup_test_manifest";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + kBackupManifestFile;
  WriteFile(path, R"({"format":"ringcache-backup","format_version":1,"release":"0.2.0",)"
                  R"("created":"2026-11-29T22:59:57+00:00","snapshot_sha256":"abcd"})");
  auto m = ReadBackupManifest(dir);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->version, 1u);
  EXPECT_EQ(m->release, "0.2.0");
  EXPECT_EQ(m->created, "2026-11-29T22:59:57+00:00");

  WriteFile(path, R"({"format":"ringcache-backup","format_version":9,"release":"9.0.0"})");
  auto newer = ReadBackupManifest(dir);
  EXPECT_TRUE(absl::IsFailedPrecondition(newer.status())) << newer.status();
  EXPECT_NE(newer.status().message().find("reads"), std::string::npos) << newer.status();

  WriteFile(path, R"({"format":"something-else","format_version":1})");
  EXPECT_TRUE(absl::IsInvalidArgument(ReadBackupManifest(dir).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ReadBackupManifest(dir + "/none").status()));
}

}  // namespace
}  // namespace ringcache::ctl
