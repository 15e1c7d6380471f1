// `ringcachectl backup DIR`: a copy of the cluster's etcd state that `ringcachectl restore` can
// bring a cluster back from (docs/upgrades.md, "Backup and restore").
//
// A backup is a directory holding
//   etcd.db        etcd's own snapshot of its whole store (Maintenance.Snapshot: the backend
//                  database followed by its SHA-256, which `etcdctl snapshot restore` checks);
//   manifest.json  what the snapshot holds, for people and for `restore`: its format and version
//                  (common/formats.h, "backup"), the release that took it, when, the etcd
//                  revision, the snapshot's size and SHA-256, and the cluster as etcd described
//                  it: VDIs, nodes, ring epochs, feature level.
// The snapshot's checksum is verified before the backup is reported done; both files are
// written under temporary names and renamed, so a backup directory with a manifest is complete.
//
// Thread-compatible.
#ifndef RINGCACHE_TOOLS_CTL_BACKUP_H_
#define RINGCACHE_TOOLS_CTL_BACKUP_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/catalog.h"
#include "membership/etcd_client.h"
#include "membership/membership.h"

namespace ringcache::ctl {

inline constexpr const char* kBackupSnapshotFile = "etcd.db";
inline constexpr const char* kBackupManifestFile = "manifest.json";
inline constexpr const char* kBackupFormatName = "ringcache-backup";  // the manifest's "format"

// The cluster as etcd describes it under one prefix.
struct EtcdSummary {
  int64_t revision = 0;  // the store revision it was read at
  std::vector<coordinator::VdiRecord> vdis;
  uint32_t next_vdi_id = 1;
  std::vector<membership::NodeRecord> nodes;  // registered now (leases alive)
  uint64_t cache_ring_epoch = 0;              // 0: none published
  uint64_t data_ring_epoch = 0;
  uint32_t feature_level = 0;
};

absl::StatusOr<EtcdSummary> SummarizeEtcd(membership::EtcdClient* etcd, const std::string& prefix);

struct BackupOptions {
  std::string dir;        // created if missing; must not hold a backup already
  std::string prefix;     // the cluster's key prefix
  std::string endpoints;  // for the manifest
  bool json = false;      // print the manifest instead of a summary line
};

// Takes the backup; prints one line (or the manifest with `json`) on `out`.
absl::Status Backup(membership::EtcdClient* etcd, const BackupOptions& options, std::ostream* out);

// What `restore` needs of a backup's manifest.
struct BackupManifest {
  uint32_t version = 0;  // "format_version" (common/formats.h, kBackupFormat)
  std::string created;
  std::string release;
  std::string snapshot_sha256;
};
// Reads DIR/manifest.json: kInvalidArgument when DIR holds no ringcache backup, kFailedPrecondition
// naming the versions when its format version is not one this release reads.
absl::StatusOr<BackupManifest> ReadBackupManifest(const std::string& dir);

// The SHA-256 etcd appends to a snapshot: OK when the last 32 bytes of the file at `path` are
// the SHA-256 of everything before them; kDataLoss naming the file otherwise. Returns the
// digest (hex) of the whole file, as the manifest records it.
absl::StatusOr<std::string> VerifySnapshotFile(const std::string& path);

}  // namespace ringcache::ctl

#endif  // RINGCACHE_TOOLS_CTL_BACKUP_H_
