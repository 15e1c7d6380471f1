// The formats ringcache keeps on disk and speaks on the wire, each with the version this release
// writes and the oldest one it still reads (docs/upgrades.md). A reader meeting a version outside
// that range refuses it with a message naming both, instead of misreading it: a downgrade past a
// format change, or a disk from a newer release, fails loudly at start.
//
// Thread-safety: constants and pure functions.
#ifndef RINGCACHE_COMMON_FORMATS_H_
#define RINGCACHE_COMMON_FORMATS_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringcache {

struct Format {
  const char* name;     // as --version and the errors print it
  uint32_t writes;      // the version this release writes
  uint32_t reads_from;  // the oldest version this release reads (<= writes)
  const char* what;
};

// The cache node's SSD slot file: superblock, slot headers (cachenode/slot_store.h). 1: no
// store incarnation; 2: the incarnation and cluster stamps; 3: an extent table, written only
// once the store is resized online (`ringcachectl node resize`): a store never resized stays 2.
inline constexpr Format kSlotFileFormat{"slot-file", 3, 1, "cache node SSD slot file"};
// One slot's index entry in the slot file (cachenode/slot_store.cc): 1, entries that do not say
// their version (the byte is 0, releases up to 0.1.0); 2, entries that say it. Releases that
// do not know the byte ignore it, so version 2 needs no feature level.
inline constexpr Format kSlotEntryFormat{"slot-entry", 2, 1, "cache node SSD slot index entry"};
// The cache node's VDI table (cachenode/vdi_table.h). 1: no policy per VDI; 2: with it.
inline constexpr Format kVdiTableFormat{"vdi-table", 2, 1, "cache node VDI table"};
// The data node's RocksDB store (datanode/store_keys.h): the key layout and value encodings.
// Stores of releases before the format was recorded (v0.1.0) are version 1.
inline constexpr Format kDataStoreFormat{"datanode-store", 1, 1, "data node store"};
// A write-back log record as the data node keeps it (datanode/store_keys.h): 1, a 24- or 32-byte
// header (without and with the ownership epoch) that does not say its version; 2, a 40-byte
// header that says it. 1's readers take a version 2 record for a damaged one, so version 2 is
// written only at feature level 2 (a data node in static mode writes it always).
inline constexpr Format kLogRecordFormat{"log-record", 2, 1, "write-back log record"};
// The block data port's frames (common/block_wire.h), told apart by their magic ("CRD2").
inline constexpr Format kBlockWireFormat{"block-wire", 2, 2, "block data port frames"};
// The VDI catalog's records (coordinator/catalog.h: the gateway's file, and etcd in cluster
// mode). 1: up to 0.1.0; 2: a VDI's I/O limits (`qos=`), which 1's readers refuse. Version 2
// is written only at feature level 2 (kFeatureLevel below).
inline constexpr Format kVdiCatalogFormat{"vdi-catalog", 2, 1, "VDI catalog record"};

// The gRPC API of cache and data nodes (proto ringcache.v1, as this release fills its messages):
// said in every probe (the cache node's Stats, the data node's Health) both ways, so that a
// gateway and a node that cannot understand each other refuse at the probe, naming both
// versions, instead of misreading fields. Releases before 0.2.0 did not say (0): version 1.
// 2: the data node's log port also takes block writes and reads (kStoreBlocks, kLoadBlocks,
// common/block_wire.h); a cache node sends them only to a data node that says 2.
// 3: the log port also takes the block writes of several objects in one request and one commit
// (kStoreBlocksBatch: a destage batch); sent only to a data node that says 3.
inline constexpr Format kNodeApiFormat{"node-api", 3, 1, "cache and data node API"};

// What the cluster keeps in etcd (proto/ringcache/v1/etcd.proto; membership/etcd_value.h): 1,
// each key's own text encoding (JSON node records, catalog lines, ring text, decimal numbers), as
// up to 0.1.0; 2, one protobuf message (EtcdValue) that says its version. Releases before level 3
// cannot read version 2, so it is written only at feature level 3.
inline constexpr Format kEtcdValueFormat{"etcd-value", 2, 1, "etcd value"};

// The manifest of `ringcachectl backup` (tools/ctl/backup.h): what `ringcachectl restore` reads
// beside etcd's snapshot.
inline constexpr Format kBackupFormat{"backup", 1, 1, "etcd backup manifest"};

inline constexpr std::array<Format, 10> kFormats = {
    kSlotFileFormat,   kSlotEntryFormat,  kVdiTableFormat, kDataStoreFormat, kLogRecordFormat,
    kBlockWireFormat,  kVdiCatalogFormat, kNodeApiFormat,  kEtcdValueFormat, kBackupFormat};

// The cluster feature levels (docs/upgrades.md). A cluster runs at one level, kept in etcd and
// raised by `ringcachectl cluster finalize` once every node supports the next one; until then
// no node writes a format of the higher level, so the previous release can still be put back.
//   1: the formats of 0.1.0 (a cluster that never finalized is at level 1);
//   2: VDI I/O limits in the catalog (vdi-catalog 2), log records that say their version
//      (log-record 2);
//   3: one versioned encoding for every value in etcd (etcd-value 2).
inline constexpr uint32_t kFeatureLevel = 3;  // the highest level this release supports
inline constexpr uint32_t kBaseFeatureLevel = 1;

// OK when `found` is one `format`'s readers accept; otherwise kFailedPrecondition naming `where`,
// the version found and the versions this release reads, and which release can read it.
absl::Status CheckFormat(const Format& format, uint32_t found, absl::string_view where);

// OK when a peer that said node-api version `said` (0: a release that did not say, version 1)
// speaks one this release speaks; otherwise kFailedPrecondition naming `peer` and both versions.
absl::Status CheckPeerApi(uint32_t said, absl::string_view peer);

// "1-2", or "2" when a format reads only the version it writes.
inline std::string ReadableVersions(const Format& f) {
  return f.reads_from == f.writes ? std::to_string(f.writes)
                                  : std::to_string(f.reads_from) + "-" + std::to_string(f.writes);
}

// "formats: slot-file 2 (reads 1-2), vdi-table 2 (reads 1-2), ...": the second line of
// --version.
inline std::string FormatsLine() {
  std::string out = "formats:";
  for (const Format& f : kFormats) {
    out += (out.size() > 8 ? ", " : " ") + std::string(f.name) + " " + std::to_string(f.writes) +
           " (reads " + ReadableVersions(f) + ")";
  }
  return out;
}

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_FORMATS_H_
