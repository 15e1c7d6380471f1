// Typed errors: the few failures that a caller must tell apart to act correctly (re-route, wait,
// re-register a VDI, stop writing) carry a kind in an absl::Status payload, set here and read
// here. Nobody matches message text. The payload survives gRPC: common/grpc_status.h copies it
// into grpc::Status::error_details and back.
//
// Kinds and their codes (the code alone follows abseil's retry rules; the kind says why):
//   kFenced        UNAVAILABLE          the node may not serve as owner now (lease not valid,
//                                       quarantined after losing ownership, device failed)
//   kStaleEpoch    FAILED_PRECONDITION  the sender routed with an older cache ring epoch
//   kUnknownVdi    FAILED_PRECONDITION  the cache node does not know the VDI (restarted)
//   kOlderVersion  FAILED_PRECONDITION  a data node holds a newer version of a block than the
//                                       write carries (fencing token, docs/durability.md)
//   kDeviceFailed  UNAVAILABLE          a storage error (failed fdatasync): sticky until restart
//   kStaleTerm     ABORTED              a control step of a coordinator whose term is older than
//                                       one the receiver has seen (proto ControlFence)
//   kLogSealed     FAILED_PRECONDITION  a data node refused a log record of a cache node whose
//                                       log was sealed for a replay: the node lost its objects
//
// Thread-safety: stateless functions.
#ifndef RINGCACHE_COMMON_ERRORS_H_
#define RINGCACHE_COMMON_ERRORS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringcache {

enum class ErrorKind {
  kNone,
  kFenced,
  kStaleEpoch,
  kUnknownVdi,
  kOlderVersion,
  kDeviceFailed,
  kStaleTerm,
  kLogSealed,
};
// The last kind: wire decoders accept kinds up to it (add new kinds before this line's kind).
inline constexpr ErrorKind kLastErrorKind = ErrorKind::kLogSealed;

// The payload's type URL (absl::Status::SetPayload).
inline constexpr absl::string_view kErrorKindUrl = "type.ringcache.dev/ErrorKind";

// Returns a status with the kind's code, `message`, and the kind as payload.
absl::Status TypedError(ErrorKind kind, absl::string_view message);
// Returns the kind carried by `s`, or kNone.
ErrorKind KindOf(const absl::Status& s);
inline bool IsKind(const absl::Status& s, ErrorKind k) { return KindOf(s) == k; }
// The kind's wire name ("fenced", "stale_epoch", ...); "" for kNone.
absl::string_view ErrorKindName(ErrorKind kind);
// Parses a wire name; kNone if unknown.
ErrorKind ErrorKindFromName(absl::string_view name);
// Returns `s` with `prefix` put before its message, keeping code and payloads.
absl::Status Annotate(const absl::Status& s, absl::string_view prefix);

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_ERRORS_H_
