// Conversions between absl::Status and grpc::Status (same numeric codes), used at the gRPC edge
// of every service and client. Header-only; include only from code that links gRPC.
#ifndef RINGCACHE_COMMON_GRPC_STATUS_H_
#define RINGCACHE_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringcache {

inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// Converts a gRPC status, prefixing its message with `what` (the operation and peer).
inline absl::Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(what, ": ", s.error_message()));
}

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_GRPC_STATUS_H_
