// Conversions between absl::Status and grpc::Status (same numeric codes), used at the gRPC edge
// of every service and client. Header-only; include only from code that links gRPC.
#ifndef RINGCACHE_COMMON_GRPC_STATUS_H_
#define RINGCACHE_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"

namespace ringcache {

// The error kind (common/errors.h) travels in error_details as its wire name.
inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()),
                      std::string(ErrorKindName(KindOf(s))));
}

// Converts a gRPC status, prefixing its message with `what` (the operation and peer).
inline absl::Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(s.error_code()),
                   absl::StrCat(what, ": ", s.error_message()));
  const ErrorKind kind = ErrorKindFromName(s.error_details());
  if (kind != ErrorKind::kNone) out = TypedError(kind, out.message());
  return out;
}

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_GRPC_STATUS_H_
