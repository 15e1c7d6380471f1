#include "common/errors.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace ringcache {
namespace {

absl::StatusCode CodeOf(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kFenced:
    case ErrorKind::kDeviceFailed:
      return absl::StatusCode::kUnavailable;
    case ErrorKind::kStaleEpoch:
    case ErrorKind::kUnknownVdi:
    case ErrorKind::kOlderVersion:
    case ErrorKind::kLogSealed:
      return absl::StatusCode::kFailedPrecondition;
    case ErrorKind::kStaleTerm:
      return absl::StatusCode::kAborted;
    case ErrorKind::kNone:
      break;
  }
  return absl::StatusCode::kUnknown;
}

}  // namespace

absl::string_view ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kFenced: return "fenced";
    case ErrorKind::kStaleEpoch: return "stale_epoch";
    case ErrorKind::kUnknownVdi: return "unknown_vdi";
    case ErrorKind::kOlderVersion: return "older_version";
    case ErrorKind::kDeviceFailed: return "device_failed";
    case ErrorKind::kStaleTerm: return "stale_term";
    case ErrorKind::kLogSealed: return "log_sealed";
    case ErrorKind::kNone: break;
  }
  return "";
}

ErrorKind ErrorKindFromName(absl::string_view name) {
  for (ErrorKind k : {ErrorKind::kFenced, ErrorKind::kStaleEpoch, ErrorKind::kUnknownVdi,
                      ErrorKind::kOlderVersion, ErrorKind::kDeviceFailed, ErrorKind::kStaleTerm,
                      ErrorKind::kLogSealed}) {
    if (name == ErrorKindName(k)) return k;
  }
  return ErrorKind::kNone;
}

absl::Status TypedError(ErrorKind kind, absl::string_view message) {
  absl::Status s(CodeOf(kind), message);
  s.SetPayload(kErrorKindUrl, absl::Cord(ErrorKindName(kind)));
  return s;
}

ErrorKind KindOf(const absl::Status& s) {
  if (s.ok()) return ErrorKind::kNone;
  auto p = s.GetPayload(kErrorKindUrl);
  if (!p.has_value()) return ErrorKind::kNone;
  return ErrorKindFromName(std::string(*p));
}

absl::Status Annotate(const absl::Status& s, absl::string_view prefix) {
  if (s.ok()) return s;
  absl::Status out(s.code(), absl::StrCat(prefix, s.message()));
  s.ForEachPayload([&out](absl::string_view url, const absl::Cord& payload) {
    out.SetPayload(url, payload);
  });
  return out;
}

}  // namespace ringcache
