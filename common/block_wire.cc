#include "common/block_wire.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringcache::wire {
namespace {

// Little-endian stores and loads (the machines we run on are little-endian; memcpy keeps it
// alignment-safe and the compiler turns it into plain moves).
template <typename T>
void Put(char* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
template <typename T>
T Get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

void EncodeRequest(const Request& r, char out[kRequestBytes]) {
  Put<uint32_t>(out, kRequestMagic);
  Put<uint8_t>(out + 4, static_cast<uint8_t>(r.op));
  Put<uint8_t>(out + 5, r.flags);
  Put<uint16_t>(out + 6, 0);
  Put<uint32_t>(out + 8, r.vdi);
  Put<uint32_t>(out + 12, r.offset);
  Put<uint64_t>(out + 16, r.object);
  Put<uint32_t>(out + 24, r.length);
  Put<uint32_t>(out + 28, r.timeout_ms);
  Put<uint64_t>(out + 32, r.epoch);
  Put<uint64_t>(out + 40, r.tag);
}

absl::Status DecodeRequest(const char in[kRequestBytes], Request* r) {
  if (Get<uint32_t>(in) != kRequestMagic) {
    return absl::InvalidArgumentError("not a ringcache block request (bad magic)");
  }
  const auto op = Get<uint8_t>(in + 4);
  if (op < static_cast<uint8_t>(Op::kRead) || op > static_cast<uint8_t>(kLastOp)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown block request op ", op));
  }
  r->op = static_cast<Op>(op);
  r->flags = Get<uint8_t>(in + 5);
  if ((r->flags & ~kMayReorder) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("unknown block request flags ", r->flags));
  }
  r->vdi = Get<uint32_t>(in + 8);
  r->offset = Get<uint32_t>(in + 12);
  r->object = Get<uint64_t>(in + 16);
  r->length = Get<uint32_t>(in + 24);
  r->timeout_ms = Get<uint32_t>(in + 28);
  r->epoch = Get<uint64_t>(in + 32);
  r->tag = Get<uint64_t>(in + 40);
  if (r->length > kMaxLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("block request of ", r->length, " bytes (at most ", kMaxLength, ")"));
  }
  return absl::OkStatus();
}

void EncodeResponse(const Response& r, char out[kResponseBytes]) {
  Put<uint32_t>(out, kResponseMagic);
  Put<uint8_t>(out + 4, static_cast<uint8_t>(r.code));
  Put<uint8_t>(out + 5, static_cast<uint8_t>(r.kind));
  Put<uint16_t>(out + 6, 0);
  Put<uint32_t>(out + 8, r.message_len);
  Put<uint32_t>(out + 12, r.data_len);
  Put<uint64_t>(out + 16, r.tag);
}

absl::Status DecodeResponse(const char in[kResponseBytes], Response* r) {
  if (Get<uint32_t>(in) != kResponseMagic) {
    return absl::DataLossError("not a ringcache block response (bad magic)");
  }
  const auto code = Get<uint8_t>(in + 4);
  const auto kind = Get<uint8_t>(in + 5);
  if (code > static_cast<uint8_t>(absl::StatusCode::kUnauthenticated) ||
      kind > static_cast<uint8_t>(kLastErrorKind)) {
    return absl::DataLossError("block response with an unknown status");
  }
  r->code = static_cast<absl::StatusCode>(code);
  r->kind = static_cast<ErrorKind>(kind);
  r->message_len = Get<uint32_t>(in + 8);
  r->data_len = Get<uint32_t>(in + 12);
  r->tag = Get<uint64_t>(in + 16);
  if (r->message_len > kMaxMessage || r->data_len > kMaxLength) {
    return absl::DataLossError("block response longer than the protocol allows");
  }
  return absl::OkStatus();
}

absl::Status ToStatus(const Response& r, const std::string& message) {
  if (r.code == absl::StatusCode::kOk) return absl::OkStatus();
  if (r.kind != ErrorKind::kNone) return TypedError(r.kind, message);
  return absl::Status(r.code, message);
}

Response FromStatus(const absl::Status& s, uint32_t data_len) {
  Response r;
  r.code = s.code();
  r.kind = KindOf(s);
  r.message_len = static_cast<uint32_t>(std::min<size_t>(s.message().size(), kMaxMessage));
  r.data_len = s.ok() ? data_len : 0;
  return r;
}

std::string EncodeStorePrefix(const std::string& store_incarnation) {
  const size_t n = std::min<size_t>(store_incarnation.size(), 0xffff);
  std::string out(2 + n, '\0');
  out[0] = static_cast<char>(n & 0xff);
  out[1] = static_cast<char>(n >> 8);
  std::memcpy(out.data() + 2, store_incarnation.data(), n);
  return out;
}

absl::Status DecodeStorePrefix(const std::string& payload, std::string* store_incarnation,
                               size_t* rest_at) {
  if (payload.size() < 2) {
    return absl::InvalidArgumentError("a block store request without its prefix");
  }
  const size_t n =
      static_cast<uint8_t>(payload[0]) | (size_t{static_cast<uint8_t>(payload[1])} << 8);
  if (payload.size() < 2 + n) {
    return absl::InvalidArgumentError("a block store request shorter than its prefix says");
  }
  store_incarnation->assign(payload, 2, n);
  *rest_at = 2 + n;
  return absl::OkStatus();
}

}  // namespace ringcache::wire
