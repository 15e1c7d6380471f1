// NBD wire protocol, transmission phase: request headers parsed and checked against the
// session's limits, and the simple and structured replies built. Pure code; see nbd_protocol.h.
#include "gateway/nbd_protocol.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringcache::gateway::nbd {

const char* CommandName(uint16_t type) {
  switch (type) {
    case kCmdRead:
      return "read";
    case kCmdWrite:
      return "write";
    case kCmdDisc:
      return "disc";
    case kCmdFlush:
      return "flush";
    case kCmdTrim:
      return "trim";
    case kCmdCache:
      return "cache";
    case kCmdWriteZeroes:
      return "write_zeroes";
    case kCmdBlockStatus:
      return "block_status";
    default:
      return "unknown";
  }
}

const char* ErrnoName(uint32_t error) {
  switch (error) {
    case 0:
      return "ok";
    case kEperm:
      return "eperm";
    case kEio:
      return "eio";
    case kEnomem:
      return "enomem";
    case kEinval:
      return "einval";
    case kEnospc:
      return "enospc";
    case kEoverflow:
      return "eoverflow";
    case kEnotsup:
      return "enotsup";
    case kEshutdown:
      return "eshutdown";
    default:
      return "eio";
  }
}

uint32_t ErrnoFromStatus(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 0;
    case absl::StatusCode::kInvalidArgument:
      return kEinval;
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kResourceExhausted:
      return kEnospc;
    case absl::StatusCode::kPermissionDenied:
      return kEperm;
    default:
      return kEio;
  }
}

// ---- Requests -------------------------------------------------------------------------------------

absl::StatusOr<Request> ParseRequestHeader(const char* data, size_t len) {
  if (len < kRequestHeaderSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("request header needs ", kRequestHeaderSize, " bytes, got ", len));
  }
  const uint32_t magic = GetU32(data);
  if (magic != kRequestMagic) {
    return absl::InvalidArgumentError(absl::StrCat("bad request magic 0x", absl::Hex(magic)));
  }
  Request r;
  r.flags = GetU16(data + 4);
  r.type = GetU16(data + 6);
  r.handle = GetU64(data + 8);
  r.offset = GetU64(data + 16);
  r.length = GetU32(data + 24);
  return r;
}

void AppendRequest(std::string* out, const Request& request) {
  PutU32(out, kRequestMagic);
  PutU16(out, request.flags);
  PutU16(out, request.type);
  PutU64(out, request.handle);
  PutU64(out, request.offset);
  PutU32(out, request.length);
}

RequestLimits LimitsFor(const Session& session, uint32_t max_payload) {
  RequestLimits l;
  l.export_size = session.info.size_bytes;
  l.min_block = session.info.min_block;
  l.max_payload = std::min(max_payload, kMaxPayloadLength);
  l.max_block = std::min(l.max_payload, session.info.max_block);
  l.transmission_flags = session.transmission_flags;
  l.structured_replies = session.structured_replies;
  l.base_allocation = session.base_allocation;
  return l;
}

RequestCheck CheckRequest(const Request& r, const RequestLimits& l) {
  RequestCheck c;
  if (r.type == kCmdWrite) c.payload = r.length;
  auto fail = [&c](uint32_t error, const char* reason) {
    c.error = error;
    c.reason = reason;
    return c;
  };
  if (r.type == kCmdWrite && r.length > l.max_payload) {
    c.close = true;
    return fail(kEinval, "write length exceeds the maximum payload");
  }
  const uint16_t tx = l.transmission_flags;
  uint16_t allowed = (tx & kTxSendFua) ? kCmdFlagFua : 0;
  switch (r.type) {
    case kCmdDisc:
      return c;
    case kCmdRead:
      if (tx & kTxSendDf) allowed |= kCmdFlagDf;
      break;
    case kCmdWrite:
    case kCmdFlush:
    case kCmdTrim:
    case kCmdCache:
      break;
    case kCmdWriteZeroes:
      allowed |= kCmdFlagNoHole;
      if (tx & kTxSendFastZero) allowed |= kCmdFlagFastZero;
      break;
    case kCmdBlockStatus:
      allowed |= kCmdFlagReqOne;
      break;
    default:
      return fail(kEinval, "unknown command");
  }
  if ((r.flags & ~allowed) != 0) return fail(kEinval, "command flag not valid for this command");
  if (r.type == kCmdFlush) return c;  // offset and length are reserved; ignored
  if ((r.type == kCmdRead || r.type == kCmdWrite || r.type == kCmdCache) &&
      (r.length > l.max_block || r.length > l.max_payload)) {
    return fail(kEinval, "length exceeds the maximum block size");
  }
  const bool writes = r.type == kCmdWrite || r.type == kCmdTrim || r.type == kCmdWriteZeroes;
  if (writes && (tx & kTxReadOnly)) return fail(kEperm, "export is read-only");
  if (r.type == kCmdBlockStatus) {
    if (!l.structured_replies || !l.base_allocation) {
      return fail(kEinval, "no metadata context was negotiated");
    }
    if (r.length == 0) return fail(kEinval, "block status of an empty range");
  }
  if (l.min_block > 1 && (r.offset % l.min_block != 0 || r.length % l.min_block != 0)) {
    return fail(kEinval, "offset or length not aligned to the minimum block size");
  }
  const uint64_t end = r.offset + r.length;
  const bool past_end = end < r.offset || end > l.export_size;
  if (past_end) {
    if (r.type == kCmdWrite || r.type == kCmdWriteZeroes) {
      return fail(kEnospc, "write beyond the end of the export");
    }
    return fail(kEinval, "request beyond the end of the export");
  }
  return c;
}

// ---- Replies ----------------------------------------------------------------------------------------

void AppendSimpleReply(std::string* out, uint32_t error, uint64_t handle) {
  PutU32(out, kSimpleReplyMagic);
  PutU32(out, error);
  PutU64(out, handle);
}

void AppendStructuredHeader(std::string* out, uint16_t flags, uint16_t type, uint64_t handle,
                            uint32_t payload_length) {
  PutU32(out, kStructuredReplyMagic);
  PutU16(out, flags);
  PutU16(out, type);
  PutU64(out, handle);
  PutU32(out, payload_length);
}

void AppendStructuredNone(std::string* out, uint64_t handle) {
  AppendStructuredHeader(out, kReplyFlagDone, kReplyTypeNone, handle, 0);
}

void AppendOffsetDataHeader(std::string* out, uint16_t flags, uint64_t handle, uint64_t offset,
                            uint32_t data_length) {
  AppendStructuredHeader(out, flags, kReplyTypeOffsetData, handle, data_length + 8);
  PutU64(out, offset);
}

void AppendStructuredError(std::string* out, uint16_t flags, uint64_t handle, uint32_t error,
                           const std::string& message) {
  const std::string msg = message.substr(0, kMaxStringLength);
  AppendStructuredHeader(out, flags, kReplyTypeError, handle,
                         static_cast<uint32_t>(6 + msg.size()));
  PutU32(out, error);
  PutU16(out, static_cast<uint16_t>(msg.size()));
  out->append(msg);
}

std::vector<BlockStatusDescriptor> ToDescriptors(const std::vector<Extent>& extents,
                                                 uint32_t length, bool req_one,
                                                 size_t max_descriptors) {
  std::vector<BlockStatusDescriptor> out;
  if (req_one) max_descriptors = 1;
  uint64_t total = 0;
  for (const Extent& e : extents) {
    if (total >= length) break;
    if (e.length == 0) continue;
    const uint32_t flags = (e.hole ? kStateHole : 0) | (e.zero ? kStateZero : 0);
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(e.length, length - total));
    if (!out.empty() && out.back().flags == flags) {
      out.back().length += n;  // cannot overflow: the sum stays <= length
    } else {
      if (out.size() == max_descriptors) break;
      out.push_back({n, flags});
    }
    total += n;
  }
  if (out.empty()) out.push_back({length, 0});
  return out;
}

void AppendBlockStatus(std::string* out, uint16_t flags, uint64_t handle, uint32_t context_id,
                       const std::vector<BlockStatusDescriptor>& descriptors) {
  AppendStructuredHeader(out, flags, kReplyTypeBlockStatus, handle,
                         static_cast<uint32_t>(4 + 8 * descriptors.size()));
  PutU32(out, context_id);
  for (const BlockStatusDescriptor& d : descriptors) {
    PutU32(out, d.length);
    PutU32(out, d.flags);
  }
}

}  // namespace ringcache::gateway::nbd
