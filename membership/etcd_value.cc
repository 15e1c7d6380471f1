#include "membership/etcd_value.h"

#include <atomic>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/formats.h"
#include "common/status_macros.h"

namespace ringcache::membership {
namespace {

std::atomic<uint32_t> noted_level{kBaseFeatureLevel};

// The first byte of every EtcdValue: field 1 (format), varint.
constexpr char kEtcdValueTag = 0x08;

const char* BodyName(v1::EtcdValue::BodyCase body) {
  switch (body) {
    case v1::EtcdValue::kNode: return "a node record";
    case v1::EtcdValue::kVdi: return "a VDI record";
    case v1::EtcdValue::kCacheRing: return "a cache ring";
    case v1::EtcdValue::kDataRing: return "a data ring";
    case v1::EtcdValue::kNumber: return "a number";
    case v1::EtcdValue::kMark: return "a mark";
    case v1::EtcdValue::kDataActions: return "data node actions";
    case v1::EtcdValue::BODY_NOT_SET: break;
  }
  return "nothing this release knows";
}

}  // namespace

void NoteClusterFeatureLevel(uint32_t level) { noted_level.store(level); }
uint32_t NotedClusterFeatureLevel() { return noted_level.load(); }
bool WritesEtcdValues() { return noted_level.load() >= kEtcdValueFeatureLevel; }

ScopedClusterFeatureLevel::ScopedClusterFeatureLevel(uint32_t level)
    : previous_(noted_level.exchange(level)) {}
ScopedClusterFeatureLevel::~ScopedClusterFeatureLevel() { noted_level.store(previous_); }

bool IsEtcdValue(absl::string_view value) {
  return !value.empty() && value.front() == kEtcdValueTag;
}

std::string EncodeEtcdValue(v1::EtcdValue v) {
  v.set_format(kEtcdValueFormat.writes);
  return v.SerializeAsString();
}

absl::StatusOr<v1::EtcdValue> DecodeEtcdValue(absl::string_view value,
                                              v1::EtcdValue::BodyCase body,
                                              absl::string_view what) {
  v1::EtcdValue v;
  // A newer version may carry fields this one does not know: they are kept as unknown fields,
  // and the version check below speaks before anything is read from them.
  if (!v.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    return absl::DataLossError(absl::StrCat(what, ": not an etcd value (damaged?)"));
  }
  RC_RETURN_IF_ERROR(CheckFormat(kEtcdValueFormat, v.format(), what));
  if (v.body_case() != body) {
    return absl::DataLossError(absl::StrCat(what, ": holds ", BodyName(v.body_case()),
                                            ", not ", BodyName(body)));
  }
  return v;
}

absl::Status EtcdReadError(absl::string_view key, const absl::Status& decode) {
  return absl::Status(
      absl::IsFailedPrecondition(decode) ? decode.code() : absl::StatusCode::kDataLoss,
      absl::StrCat(key, ": ", decode.message()));
}

std::string EncodeNumberValue(uint64_t n, bool newline) {
  return EncodeNumberValueAs(n, WritesEtcdValues(), newline);
}

std::string EncodeNumberValueAs(uint64_t n, bool message, bool newline) {
  if (!message) return newline ? absl::StrCat(n, "\n") : absl::StrCat(n);
  v1::EtcdValue v;
  v.set_number(n);
  return EncodeEtcdValue(std::move(v));
}

absl::StatusOr<uint64_t> DecodeNumberValue(absl::string_view value, absl::string_view what) {
  if (IsEtcdValue(value)) {
    RC_ASSIGN_OR_RETURN(v1::EtcdValue v, DecodeEtcdValue(value, v1::EtcdValue::kNumber, what));
    return v.number();
  }
  uint64_t n = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(value), &n)) {
    return absl::DataLossError(absl::StrCat(what, ": '", value, "' is not a number"));
  }
  return n;
}

std::string EncodeMarkValue(absl::string_view text) {
  if (!WritesEtcdValues()) return std::string(text);
  v1::EtcdValue v;
  v.set_mark(std::string(text));
  return EncodeEtcdValue(std::move(v));
}

absl::StatusOr<std::string> DecodeMarkValue(absl::string_view value, absl::string_view what) {
  if (!IsEtcdValue(value)) return std::string(value);
  RC_ASSIGN_OR_RETURN(v1::EtcdValue v, DecodeEtcdValue(value, v1::EtcdValue::kMark, what));
  return v.mark();
}

}  // namespace ringcache::membership
