// One versioned encoding for every value ringcache keeps in etcd (format `etcd-value`,
// common/formats.h; proto/ringcache/v1/etcd.proto; docs/upgrades.md "What etcd holds").
//
// Version 1 is each key's own text (JSON node records, catalog lines, ring text, decimal
// numbers, free-text marks), as 0.1.0 writes it; version 2 is one protobuf message, EtcdValue,
// that says its version first. Readers of this release take both, telling them apart by the first
// byte (EtcdValue's field 1 tag, 0x08, begins no text of version 1), and refuse a newer version
// with a message naming the versions that meet. Writers write version 2 only once the cluster's
// feature level is kEtcdValueFeatureLevel: until then a node of the previous release may still
// read every key.
//
// Which one a process writes follows the cluster feature level it last read
// (membership/feature_level.h notes every level it reads here; a daemon reads it when it starts,
// the coordinator when it takes office and when it finalizes). A process that has read none
// writes version 1.
//
// The per-kind conversions live beside each kind's text form (membership.h, cache_ring_state.h,
// coordinator/catalog.h, datanode/client/datanode_pool.h, coordinator/etcd_state.h).
//
// Thread-safety: the noted level is an atomic; the rest are pure functions.
#ifndef RINGCACHE_MEMBERSHIP_ETCD_VALUE_H_
#define RINGCACHE_MEMBERSHIP_ETCD_VALUE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ringcache/v1/etcd.pb.h"

namespace ringcache::membership {

// The feature level from which etcd values are written as EtcdValue (version 2).
inline constexpr uint32_t kEtcdValueFeatureLevel = 3;

// The cluster feature level this process last read (kBaseFeatureLevel before any), and whether
// its etcd writes are therefore EtcdValues.
void NoteClusterFeatureLevel(uint32_t level);
uint32_t NotedClusterFeatureLevel();
bool WritesEtcdValues();

// Tests: notes `level` for the scope, then puts the previous one back.
class ScopedClusterFeatureLevel {
 public:
  explicit ScopedClusterFeatureLevel(uint32_t level);
  ~ScopedClusterFeatureLevel();
  ScopedClusterFeatureLevel(const ScopedClusterFeatureLevel&) = delete;
  ScopedClusterFeatureLevel& operator=(const ScopedClusterFeatureLevel&) = delete;

 private:
  uint32_t previous_;
};

// True when `value` is an EtcdValue (version 2 or later) rather than version 1's text.
bool IsEtcdValue(absl::string_view value);

// `v` with this release's format version, serialized.
std::string EncodeEtcdValue(v1::EtcdValue v);

// Parses an EtcdValue that must hold `body`. kFailedPrecondition naming the versions when it is
// of a version this release does not read; kDataLoss when it does not parse or holds another
// kind. `what` names the value in the message ("P/rings/cache").
absl::StatusOr<v1::EtcdValue> DecodeEtcdValue(absl::string_view value,
                                              v1::EtcdValue::BodyCase body, absl::string_view what);

// The error of a value read at `key` that did not decode: the key first, then what was wrong;
// a newer version keeps its kFailedPrecondition, anything else is damage (kDataLoss).
absl::Status EtcdReadError(absl::string_view key, const absl::Status& decode);

// Numbers (ring epochs, the next VDI id, the feature level). Version 1: decimal, followed by
// `newline` ("N\n" for epochs, "N" for the others); version 2 when the process writes it.
std::string EncodeNumberValue(uint64_t n, bool newline = false);
// The same in the version the caller chose (`message`: 2), whatever the process writes: the
// feature level's own key, whose version follows the level it holds.
std::string EncodeNumberValueAs(uint64_t n, bool message, bool newline = false);
// Either version; the text may end in white space. kDataLoss naming `what` otherwise.
absl::StatusOr<uint64_t> DecodeNumberValue(absl::string_view value, absl::string_view what);

// Marks (a drained node, a data purge pending, a restore under way): free text.
std::string EncodeMarkValue(absl::string_view text);
absl::StatusOr<std::string> DecodeMarkValue(absl::string_view value, absl::string_view what);

}  // namespace ringcache::membership

#endif  // RINGCACHE_MEMBERSHIP_ETCD_VALUE_H_
