// The data node store's key and value encodings (datanode/store.h has the layout): big-endian
// integers, written most significant byte first, so that RocksDB's bytewise order is numeric
// order; the keys of blocks, log records, VDIs and the meta entries; the stored block and log
// record values. Internal to the store's files (store.cc, store_log.cc, store_scrub.cc,
// store_fence.cc).
//
// Thread-safety: stateless functions.
#ifndef RINGCACHE_DATANODE_STORE_KEYS_H_
#define RINGCACHE_DATANODE_STORE_KEYS_H_

#include <rocksdb/slice.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/formats.h"
#include "datanode/store.h"

namespace ringcache::datanode::store_keys {

inline void PutBe32(std::string* s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s->push_back(static_cast<char>((v >> (i * 8)) & 0xff));
}
inline void PutBe64(std::string* s, uint64_t v) {
  for (int i = 7; i >= 0; --i) s->push_back(static_cast<char>((v >> (i * 8)) & 0xff));
}
// `prefix` followed by `id` (a node, writer or VDI id): the meta keys kept per id.
inline std::string IdKey(const char* prefix, uint32_t id) {
  std::string k = prefix;
  PutBe32(&k, id);
  return k;
}
inline uint64_t GetBe(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

inline constexpr char kBlocksCf[] = "blocks";
inline constexpr char kLogCf[] = "log";
inline constexpr size_t kLogHeader = 4 + 8 + 4 + 8;

inline std::string BlockKey(uint32_t vdi, uint64_t object, uint32_t block) {
  std::string k;
  k.reserve(16);
  PutBe32(&k, vdi);
  PutBe64(&k, object);
  PutBe32(&k, block);
  return k;
}

inline constexpr char kHighWaterPrefix[] = "seqhw/";
inline constexpr char kIncompletePrefix[] = "incomplete/";
inline constexpr char kIncarnationKey[] = "store/incarnation";
inline constexpr char kClusterKey[] = "store/cluster";
// The store's format version (common/formats.h kDataStoreFormat), decimal; absent in stores of
// v0.1.0, which are version 1.
inline constexpr char kFormatKey[] = "store/format";
inline constexpr char kRingKey[] = "ring/data";
// A writer's mark moves this far past the sequence that raised it.
inline constexpr uint64_t kHighWaterStep = uint64_t{1} << 20;

inline std::string HighWaterKey(uint32_t writer) { return IdKey(kHighWaterPrefix, writer); }

inline constexpr char kWriterIncarnationPrefix[] = "winc/";

inline std::string WriterIncarnationKey(uint32_t writer) {
  return IdKey(kWriterIncarnationPrefix, writer);
}

inline std::string IncompleteKey(uint32_t vdi) { return IdKey(kIncompletePrefix, vdi); }

inline std::string LogKey(uint32_t node, uint64_t seq) {
  std::string k;
  k.reserve(12);
  PutBe32(&k, node);
  PutBe64(&k, seq);
  return k;
}

inline std::string VdiKey(uint32_t vdi) {
  std::string k = "vdi/";
  PutBe32(&k, vdi);
  return k;
}

inline uint64_t BlocksPerObject(const v1::VdiGeometry& g) {
  return g.object_size() / g.block_size();
}

// Version encodings: writer(4) seq(8), and since fencing tokens epoch(8) after them.
inline constexpr size_t kOldVersionBytes = 4 + 8;
inline constexpr size_t kVersionBytes = 4 + 8 + 8;
inline constexpr size_t kOldTombstoneBytes = 1 + kOldVersionBytes;
inline constexpr size_t kTombstoneBytes = 1 + kVersionBytes;

inline void PutVersion(std::string* s, const BlockVersion& v) {
  PutBe32(s, v.writer);
  PutBe64(s, v.seq);
  PutBe64(s, v.epoch);
}
inline BlockVersion GetVersion(const char* p, size_t len) {
  BlockVersion v{static_cast<uint32_t>(GetBe(p, 4)), GetBe(p + 4, 8), 0};
  if (len >= kVersionBytes) v.epoch = GetBe(p + 12, 8);
  return v;
}
inline bool IsTombstone(const std::string& v) {
  return (v.size() == kTombstoneBytes || v.size() == kOldTombstoneBytes) && v[0] == 'T';
}
inline bool PowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Decoded stored block value (see the key layout in store.h).
struct StoredBlock {
  bool present = false;  // false: tombstone
  uint64_t checksum = 0;
  const char* data = nullptr;
  BlockVersion version;
};

// `verify`: check the data's checksum (a caller that needs only the version may skip it).
inline absl::StatusOr<StoredBlock> DecodeBlock(const std::string& v, uint32_t bs,
                                               const std::string& what, bool verify = true) {
  StoredBlock b;
  if (IsTombstone(v)) {
    b.version = GetVersion(v.data() + 1, v.size() - 1);
    return b;
  }
  if (v.size() != 8 + bs && v.size() != 8 + bs + kOldVersionBytes &&
      v.size() != 8 + bs + kVersionBytes) {
    return absl::DataLossError(absl::StrCat(what, " has ", v.size(), " stored bytes, expected ",
                                            8 + bs, " or ", 8 + bs + kVersionBytes));
  }
  b.present = true;
  b.checksum = GetBe(v.data(), 8);
  b.data = v.data() + 8;
  if (v.size() > 8 + bs) b.version = GetVersion(v.data() + 8 + bs, v.size() - 8 - bs);
  if (verify && BlockChecksum(b.data, bs) != b.checksum) {
    return absl::DataLossError(absl::StrCat("checksum mismatch: ", what));
  }
  return b;
}

// A log record's value (kLogRecordFormat). Version 1 did not say its version: a 24-byte header
// (VDI 4, object 8, block 4, data checksum 8, big-endian), later 32 (+ the ownership epoch 8),
// then the block; the two are told apart by the block's length (a power of two). Version 2 says
// it: the byte kLogVersionMark, the version, 6 zero bytes, then version 1's 32-byte header and
// the block. A version 1 record cannot begin with kLogVersionMark: its first byte is the top
// byte of a VDI id, and ids stay below kMaxVdiId (coordinator/catalog.h).
inline constexpr uint8_t kLogVersionMark = 0xFF;
inline constexpr size_t kLogHeaderV2 = 8 + kLogHeader + 8;
inline void EncodeLogRecord(const LogEntry& r, uint32_t version, std::string* out) {
  out->clear();
  out->reserve(kLogHeaderV2 + r.data.size());
  if (version >= 2) {
    out->push_back(static_cast<char>(kLogVersionMark));
    out->push_back(static_cast<char>(version));
    out->append(6, '\0');
  }
  PutBe32(out, r.vdi_id);
  PutBe64(out, r.object_index);
  PutBe32(out, r.block_index);
  PutBe64(out, r.checksum);
  PutBe64(out, r.epoch);
  *out += r.data;
}

enum class LogRead {
  kGood,
  kDamaged,  // too short, a rotten header, or data that fails its checksum
  kNewer,    // a version this release does not read (*version says which): not damaged
};

// Parses log record value `v` of key `k` (12 bytes) into *e (the version found in *version when
// not null).
inline LogRead ParseLogRecord(const rocksdb::Slice& k, const rocksdb::Slice& v, bool include_data,
                              LogEntry* e, uint32_t* version = nullptr) {
  if (k.size() != 12) return LogRead::kDamaged;  // not a log key (a rotted key must not read past)
  e->cache_node_id = static_cast<uint32_t>(GetBe(k.data(), 4));
  e->sequence = GetBe(k.data() + 4, 8);
  const char* p = v.data();
  size_t n = v.size();
  uint32_t found = 1;
  if (n >= 2 && static_cast<uint8_t>(p[0]) == kLogVersionMark) {
    found = static_cast<uint8_t>(p[1]);
    if (version != nullptr) *version = found;
    if (found > kLogRecordFormat.writes) return LogRead::kNewer;
    if (found < 2 || n < kLogHeaderV2) return LogRead::kDamaged;
    for (int i = 2; i < 8; ++i) {
      if (p[i] != 0) return LogRead::kDamaged;
    }
    p += 8;
    n -= 8;
  } else if (version != nullptr) {
    *version = 1;
  }
  if (n < kLogHeader) return LogRead::kDamaged;
  e->vdi_id = static_cast<uint32_t>(GetBe(p, 4));
  e->object_index = GetBe(p + 4, 8);
  e->block_index = static_cast<uint32_t>(GetBe(p + 12, 4));
  e->checksum = GetBe(p + 16, 8);
  // Version 1: a record with an epoch has a 32-byte header, older ones 24 (blocks are powers of
  // two). Version 2 always has the epoch.
  size_t header = kLogHeader;
  if (found >= 2 || (n >= kLogHeader + 8 && PowerOfTwo(n - kLogHeader - 8))) {
    header = kLogHeader + 8;
    e->epoch = GetBe(p + kLogHeader, 8);
  }
  if (BlockChecksum(p + header, n - header) != e->checksum) return LogRead::kDamaged;
  if (include_data) e->data.assign(p + header, n - header);
  return LogRead::kGood;
}

inline std::string VersionText(const BlockVersion& v) {
  return absl::StrCat("(epoch ", v.epoch, ", seq ", v.seq, ", writer ", v.writer, ")");
}

}  // namespace ringcache::datanode::store_keys

#endif  // RINGCACHE_DATANODE_STORE_KEYS_H_
