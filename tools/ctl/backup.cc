#include "tools/ctl/backup.h"

#include <fcntl.h>
#include <gnutls/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/atomic_file.h"
#include "common/formats.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "coordinator/etcd_state.h"
#include "membership/cache_ring_state.h"
#include "membership/feature_level.h"
#include "tools/ctl/format.h"

namespace ringcache::ctl {
namespace {

constexpr size_t kDigestBytes = 32;  // SHA-256

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// A ring's epoch key: 0 when missing.
absl::StatusOr<uint64_t> ReadEpoch(membership::EtcdClient* etcd, const std::string& key) {
  RC_ASSIGN_OR_RETURN(auto kv, etcd->Get(key));
  if (!kv.has_value()) return uint64_t{0};
  absl::StatusOr<uint64_t> epoch = membership::DecodeRingEpoch(kv->value);
  if (!epoch.ok()) return absl::DataLossError(absl::StrCat(key, ": ", epoch.status().message()));
  return *epoch;
}

// SHA-256 of a stream whose last 32 bytes are held back: the digest of everything before them
// and the held-back bytes, as etcd's snapshot ends.
class TrailingDigest {
 public:
  TrailingDigest() {
    gnutls_hash_init(&body_, GNUTLS_DIG_SHA256);
    gnutls_hash_init(&whole_, GNUTLS_DIG_SHA256);
  }
  ~TrailingDigest() {
    unsigned char ignored[kDigestBytes];
    gnutls_hash_deinit(body_, ignored);
    gnutls_hash_deinit(whole_, ignored);
  }
  TrailingDigest(const TrailingDigest&) = delete;
  TrailingDigest& operator=(const TrailingDigest&) = delete;

  void Add(absl::string_view data) {
    gnutls_hash(whole_, data.data(), data.size());
    tail_.append(data.data(), data.size());
    if (tail_.size() > kDigestBytes) {
      const size_t pass = tail_.size() - kDigestBytes;
      gnutls_hash(body_, tail_.data(), pass);
      tail_.erase(0, pass);
    }
  }
  // True when the held-back bytes are the body's digest.
  bool Matches() {
    if (tail_.size() != kDigestBytes) return false;
    unsigned char digest[kDigestBytes];
    gnutls_hash_output(body_, digest);
    return std::memcmp(digest, tail_.data(), kDigestBytes) == 0;
  }
  std::string WholeHex() {
    unsigned char digest[kDigestBytes];
    gnutls_hash_output(whole_, digest);
    return absl::BytesToHexString(
        absl::string_view(reinterpret_cast<const char*>(digest), kDigestBytes));
  }

 private:
  gnutls_hash_hd_t body_;
  gnutls_hash_hd_t whole_;
  std::string tail_;
};

// Writes a snapshot stream to `path` (truncated at every attempt's first chunk), fsynced.
class SnapshotFile {
 public:
  explicit SnapshotFile(std::string path) : path_(std::move(path)) {}
  ~SnapshotFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  SnapshotFile(const SnapshotFile&) = delete;
  SnapshotFile& operator=(const SnapshotFile&) = delete;

  absl::Status Write(absl::string_view chunk, bool restart) {
    if (restart) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd_ < 0) return Errno("cannot create", path_);
      bytes_ = 0;
    }
    while (!chunk.empty()) {
      const ssize_t n = ::write(fd_, chunk.data(), chunk.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Errno("cannot write", path_);
      chunk.remove_prefix(static_cast<size_t>(n));
      bytes_ += static_cast<uint64_t>(n);
    }
    return absl::OkStatus();
  }
  absl::Status Close() {
    if (fd_ < 0) return absl::DataLossError(absl::StrCat(path_, ": no snapshot data"));
    const int fd = fd_;
    fd_ = -1;
    if (::fsync(fd) != 0) {
      ::close(fd);
      return Errno("cannot sync", path_);
    }
    if (::close(fd) != 0) return Errno("cannot close", path_);
    return absl::OkStatus();
  }
  uint64_t bytes() const { return bytes_; }

 private:
  const std::string path_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
};

std::string ManifestJson(const EtcdSummary& s, const BackupOptions& o, int64_t snapshot_revision,
                         uint64_t bytes, const std::string& sha256) {
  JsonWriter j;
  j.BeginObject()
      .Field("format", kBackupFormatName)
      .Field("format_version", kBackupFormat.writes)
      .Field("release", Version())
      .Field("created", absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone()))
      .Field("etcd_endpoints", o.endpoints)
      .Field("prefix", o.prefix)
      .Field("snapshot", kBackupSnapshotFile)
      // etcd 3.4 does not say (0): at least summary_revision, which was read just before.
      .Field("snapshot_revision", static_cast<uint64_t>(snapshot_revision))
      .Field("snapshot_bytes", bytes)
      .Field("snapshot_sha256", sha256)
      .Field("summary_revision", static_cast<uint64_t>(s.revision))
      .Field("feature_level", s.feature_level)
      .Field("cache_ring_epoch", s.cache_ring_epoch)
      .Field("data_ring_epoch", s.data_ring_epoch)
      .Field("next_vdi_id", s.next_vdi_id);
  j.Key("vdis").BeginArray();
  for (const coordinator::VdiRecord& r : s.vdis) {
    j.BeginObject()
        .Field("name", r.geometry.name())
        .Field("id", r.geometry.vdi_id())
        .Field("size_bytes", static_cast<uint64_t>(r.geometry.size_bytes()))
        .Field("replication", r.geometry.replication())
        .EndObject();
  }
  j.EndArray().Key("nodes").BeginArray();
  for (const membership::NodeRecord& n : s.nodes) {
    j.BeginObject()
        .Field("role", std::string(membership::RoleName(n.role)))
        .Field("id", n.id)
        .Field("address", n.address)
        .Field("release", n.release)
        .EndObject();
  }
  j.EndArray().EndObject();
  return j.str() + "\n";
}

}  // namespace

absl::StatusOr<EtcdSummary> SummarizeEtcd(membership::EtcdClient* etcd, const std::string& prefix) {
  EtcdSummary s;
  coordinator::EtcdCatalogStore catalog(etcd, prefix);
  RC_ASSIGN_OR_RETURN(coordinator::CatalogStore::Contents contents, catalog.LoadAll());
  s.vdis = std::move(contents.records);
  s.next_vdi_id = contents.next_id;
  for (int r = 0; r < membership::kNumRoles; ++r) {
    const auto role = static_cast<membership::Role>(r);
    RC_ASSIGN_OR_RETURN(membership::RangeResult range,
                        etcd->GetPrefix(membership::RolePrefix(prefix, role)));
    s.revision = std::max(s.revision, range.revision);
    for (const membership::KeyValue& kv : range.kvs) {
      absl::StatusOr<membership::NodeRecord> node = membership::DecodeNodeRecord(kv.value);
      if (!node.ok()) {
        return absl::DataLossError(absl::StrCat(kv.key, ": ", node.status().message()));
      }
      s.nodes.push_back(*std::move(node));
    }
  }
  RC_ASSIGN_OR_RETURN(s.cache_ring_epoch, ReadEpoch(etcd, membership::CacheRingEpochKey(prefix)));
  RC_ASSIGN_OR_RETURN(s.data_ring_epoch, ReadEpoch(etcd, membership::DataRingEpochKey(prefix)));
  RC_ASSIGN_OR_RETURN(s.feature_level, membership::ReadFeatureLevel(etcd, prefix));
  return s;
}

absl::StatusOr<BackupManifest> ReadBackupManifest(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kBackupManifestFile).string();
  absl::StatusOr<std::string> text = ReadSmallFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, " is not a ringcache backup: ", text.status().message()));
  }
  // The manifest is one line of JSON this program wrote: fields are found by their key.
  auto field = [&](absl::string_view name) -> std::string {
    const std::string key = absl::StrCat("\"", name, "\":");
    const size_t at = text->find(key);
    if (at == std::string::npos) return "";
    size_t begin = at + key.size();
    size_t end;
    if (begin < text->size() && (*text)[begin] == '"') {
      end = text->find('"', ++begin);
    } else {
      end = text->find_first_of(",}", begin);
    }
    return text->substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  };
  if (field("format") != kBackupFormatName) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, " is not a ringcache backup (", path, " has no \"format\":\"", kBackupFormatName,
        "\")"));
  }
  BackupManifest m;
  if (!absl::SimpleAtoi(field("format_version"), &m.version)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no format_version"));
  }
  RC_RETURN_IF_ERROR(CheckFormat(kBackupFormat, m.version, path));
  m.created = field("created");
  m.release = field("release");
  m.snapshot_sha256 = field("snapshot_sha256");
  return m;
}

absl::StatusOr<std::string> VerifySnapshotFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", path);
  TrailingDigest digest;
  std::string buf(1 << 20, '\0');
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status s = Errno("cannot read", path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    digest.Add(absl::string_view(buf.data(), static_cast<size_t>(n)));
  }
  ::close(fd);
  if (!digest.Matches()) {
    return absl::DataLossError(absl::StrCat(
        path, ": not a complete etcd snapshot (its last 32 bytes are not the SHA-256 of the rest)"));
  }
  return digest.WholeHex();
}

absl::Status Backup(membership::EtcdClient* etcd, const BackupOptions& o, std::ostream* out) {
  namespace fs = std::filesystem;
  const fs::path dir(o.dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", o.dir, ": ", ec.message()));
  if (fs::exists(dir / kBackupManifestFile) || fs::exists(dir / kBackupSnapshotFile)) {
    return absl::AlreadyExistsError(
        absl::StrCat(o.dir, " holds a backup already; give a new directory"));
  }
  // The summary first: the snapshot, taken after it, holds at least what it lists.
  RC_ASSIGN_OR_RETURN(EtcdSummary summary, SummarizeEtcd(etcd, o.prefix));
  const std::string part = (dir / (std::string(kBackupSnapshotFile) + ".part")).string();
  SnapshotFile file(part);
  membership::EtcdCallOptions call;
  call.timeout = absl::Minutes(30);  // a large store over a slow link
  absl::StatusOr<int64_t> revision = etcd->Snapshot(
      [&file](absl::string_view chunk, bool restart) { return file.Write(chunk, restart); }, call);
  if (!revision.ok()) {
    fs::remove(part, ec);
    return revision.status();
  }
  RC_RETURN_IF_ERROR(file.Close());
  absl::StatusOr<std::string> sha = VerifySnapshotFile(part);
  if (!sha.ok()) {
    fs::remove(part, ec);
    return sha.status();
  }
  const std::string snapshot = (dir / kBackupSnapshotFile).string();
  fs::rename(part, snapshot, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot rename ", part, ": ", ec.message()));
  const std::string manifest = ManifestJson(summary, o, *revision, file.bytes(), *sha);
  RC_RETURN_IF_ERROR(WriteFileAtomically((dir / kBackupManifestFile).string(), manifest));
  if (o.json) {
    *out << manifest;
  } else {
    *out << "backup " << o.dir << ": etcd snapshot at revision "
         << (*revision != 0 ? *revision : summary.revision) << (*revision != 0 ? "" : " or later")
         << " ("
         << file.bytes() << " bytes, sha256 " << sha->substr(0, 16) << "...), "
         << summary.vdis.size() << " VDI(s), " << summary.nodes.size()
         << " registered node(s), cache ring epoch " << summary.cache_ring_epoch
         << ", data ring epoch " << summary.data_ring_epoch << ", feature level "
         << summary.feature_level << "\n";
  }
  return absl::OkStatus();
}

}  // namespace ringcache::ctl
