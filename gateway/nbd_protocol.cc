// NBD wire protocol, server side: the handshake state machine (the transmission phase is in
// nbd_transmission.cc). Pure code; see nbd_protocol.h for the contract.
#include "gateway/nbd_protocol.h"

#include <algorithm>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"

namespace ringcache::gateway::nbd {
namespace {

bool IsPowerOfTwo(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Makes the export's block sizes satisfy the protocol's rules whatever the provider said:
// minimum a power of two <= 64 KiB; preferred a power of two >= max(minimum, 512); maximum a
// multiple of the minimum, at least the preferred size, and (unless the minimum itself is larger)
// never above what the server accepts in one request.
void SanitizeBlockSizes(ExportInfo* info, uint32_t max_payload) {
  if (!IsPowerOfTwo(info->min_block) || info->min_block > 65536) info->min_block = 512;
  uint32_t cap = std::min({info->max_block, kMaxPayloadLength, max_payload});
  cap -= cap % info->min_block;
  if (cap < info->min_block) cap = info->min_block;
  const uint32_t floor_pref = std::max<uint32_t>(info->min_block, 512);
  if (!IsPowerOfTwo(info->preferred_block) || info->preferred_block < floor_pref) {
    info->preferred_block = std::max<uint32_t>(floor_pref, 4096);
  }
  while (info->preferred_block > cap && info->preferred_block > floor_pref) {
    info->preferred_block >>= 1;
  }
  if (cap < info->preferred_block) cap = info->preferred_block;
  info->max_block = cap;
}

std::string NameString(const char* p, uint32_t len) { return std::string(p, len); }

}  // namespace

void PutU16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v));
}
void PutU32(std::string* out, uint32_t v) {
  PutU16(out, static_cast<uint16_t>(v >> 16));
  PutU16(out, static_cast<uint16_t>(v));
}
void PutU64(std::string* out, uint64_t v) {
  PutU32(out, static_cast<uint32_t>(v >> 32));
  PutU32(out, static_cast<uint32_t>(v));
}
uint16_t GetU16(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint16_t>((u[0] << 8) | u[1]);
}
uint32_t GetU32(const char* p) { return (static_cast<uint32_t>(GetU16(p)) << 16) | GetU16(p + 2); }
uint64_t GetU64(const char* p) { return (static_cast<uint64_t>(GetU32(p)) << 32) | GetU32(p + 4); }

// ---- ServerHandshake
// -----------------------------------------------------------------------------

ServerHandshake::ServerHandshake(ExportProvider* exports, HandshakeOptions options)
    : exports_(exports), options_(options) {}

void ServerHandshake::Start(std::string* out) {
  PutU64(out, kInitMagic);
  PutU64(out, kOptionMagic);
  PutU16(out, kFlagFixedNewstyle | kFlagNoZeroes);
  started_ = true;
}

size_t ServerHandshake::BytesWanted() const {
  switch (state_) {
    case State::kClientFlags:
    case State::kOptionHeader:
    case State::kOptionData:
      return need_ - buf_.size();
    case State::kOptionDiscard:
      return static_cast<size_t>(std::min<uint64_t>(discard_left_, 1 << 20));
    default:
      return 0;
  }
}

absl::StatusOr<TlsMode> ParseTlsMode(const std::string& text) {
  if (text == "off") return TlsMode::kOff;
  if (text == "on") return TlsMode::kOn;
  if (text == "require") return TlsMode::kRequire;
  return absl::InvalidArgumentError(
      absl::StrCat("TLS mode '", text, "' is not one of off, on, require"));
}

const char* TlsModeName(TlsMode mode) {
  switch (mode) {
    case TlsMode::kOff:
      return "off";
    case TlsMode::kOn:
      return "on";
    case TlsMode::kRequire:
      return "require";
  }
  return "?";
}

void ServerHandshake::TlsStarted(const std::string& client) {
  tls_active_ = true;
  client_ = client;
  structured_ = false;
  meta_export_.clear();
  meta_base_allocation_ = false;
  state_ = State::kOptionHeader;
  need_ = kOptionHeaderSize;
}

bool ServerHandshake::Allowed(const ExportInfo& info, uint32_t* refusal, std::string* why,
                              bool* read_only) const {
  if (read_only != nullptr) *read_only = info.read_only;
  if (info.public_export) return true;
  const bool listed = !info.allowed_clients.empty() || !info.read_only_clients.empty();
  // Without TLS on the server nobody has an identity: only exports without lists are served.
  if (!listed && options_.tls == TlsMode::kOff) return true;
  if (!tls_active_) {
    *refusal = kRepErrTlsReqd;
    *why = absl::StrCat("export '", info.name, "' is served over TLS only");
    return false;
  }
  if (client_.empty()) {
    *refusal = kRepErrPolicy;
    *why = absl::StrCat("export '", info.name,
                        "' needs a client certificate or PSK identity (it is not public)");
    return false;
  }
  if (!listed) return true;
  // On both lists (a hand-edited record): read-only wins.
  if (absl::c_linear_search(info.read_only_clients, client_)) {
    if (read_only != nullptr) *read_only = true;
    return true;
  }
  if (absl::c_linear_search(info.allowed_clients, client_)) return true;
  *refusal = kRepErrPolicy;
  *why = absl::StrCat("client '", client_, "' may not open export '", info.name, "'");
  return false;
}

void ServerHandshake::HandleStartTls(std::string* out) {
  if (options_.tls == TlsMode::kOff) {
    ReplyError(out, kRepErrUnsup, "TLS is not enabled on this server");
  } else if (tls_active_) {
    ReplyError(out, kRepErrInvalid, "TLS is already active");
  } else if (!buf_.empty()) {
    ReplyError(out, kRepErrInvalid, "NBD_OPT_STARTTLS takes no data");
  } else {
    Reply(out, kRepAck, "");
    state_ = State::kStartTls;
  }
}

absl::Status ServerHandshake::Fail(absl::Status why) {
  state_ = State::kClosed;
  buf_.clear();
  return why;
}

absl::StatusOr<size_t> ServerHandshake::Feed(const char* data, size_t len, std::string* out) {
  if (!started_) return Fail(absl::FailedPreconditionError("handshake fed before Start()"));
  size_t used = 0;
  while (used < len) {
    if (state_ == State::kTransmission || state_ == State::kClosed || state_ == State::kStartTls) {
      break;
    }
    if (state_ == State::kOptionDiscard) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(len - used, discard_left_));
      used += n;
      discard_left_ -= n;
      if (discard_left_ == 0) {
        ReplyError(out, kRepErrTooBig,
                   absl::StrCat("option payload of ", option_length_,
                                " bytes exceeds the limit of ", options_.max_option_length));
        state_ = State::kOptionHeader;
        need_ = kOptionHeaderSize;
      }
      continue;
    }
    const size_t n = std::min(len - used, need_ - buf_.size());
    buf_.append(data + used, n);
    used += n;
    if (buf_.size() < need_) break;

    if (state_ == State::kClientFlags) {
      const uint32_t flags = GetU32(buf_.data());
      buf_.clear();
      if ((flags & ~(kClientFlagFixedNewstyle | kClientFlagNoZeroes)) != 0) {
        return Fail(absl::InvalidArgumentError(
            absl::StrCat("client flags 0x", absl::Hex(flags), " contain unknown bits")));
      }
      // A client without NBD_FLAG_C_FIXED_NEWSTYLE is still served with fixed newstyle
      // semantics, which the protocol allows.
      no_zeroes_ = (flags & kClientFlagNoZeroes) != 0;
      state_ = State::kOptionHeader;
      need_ = kOptionHeaderSize;
      continue;
    }

    if (state_ == State::kOptionHeader) {
      const uint64_t magic = GetU64(buf_.data());
      option_ = GetU32(buf_.data() + 8);
      option_length_ = GetU32(buf_.data() + 12);
      buf_.clear();
      if (magic != kOptionMagic) {
        return Fail(
            absl::InvalidArgumentError(absl::StrCat("bad option magic 0x", absl::Hex(magic))));
      }
      if (++options_seen_ > options_.max_options) {
        return Fail(absl::ResourceExhaustedError(
            absl::StrCat("more than ", options_.max_options, " options in one handshake")));
      }
      if (option_ == kOptExportName &&
          (option_length_ > kMaxStringLength || option_length_ > options_.max_option_length)) {
        return Fail(absl::InvalidArgumentError(
            absl::StrCat("NBD_OPT_EXPORT_NAME name of ", option_length_, " bytes is too long")));
      }
      if (option_length_ > options_.max_option_length) {
        state_ = State::kOptionDiscard;
        discard_left_ = option_length_;
        continue;
      }
      state_ = State::kOptionData;
      need_ = option_length_;
      if (need_ > 0) continue;
    }

    // kOptionData with the whole payload in buf_ (possibly empty).
    absl::Status s = HandleOption(out);
    buf_.clear();
    if (!s.ok()) return Fail(std::move(s));
    if (state_ == State::kOptionData) {
      state_ = State::kOptionHeader;
      need_ = kOptionHeaderSize;
    }
  }
  return used;
}

void ServerHandshake::Reply(std::string* out, uint32_t type, const std::string& data) const {
  PutU64(out, kOptionReplyMagic);
  PutU32(out, option_);
  PutU32(out, type);
  PutU32(out, static_cast<uint32_t>(data.size()));
  out->append(data);
}

void ServerHandshake::ReplyError(std::string* out, uint32_t type,
                                 const std::string& message) const {
  Reply(out, type, message.substr(0, kMaxStringLength));
}

uint16_t ServerHandshake::TransmissionFlags(const ExportInfo& info) const {
  uint16_t flags = kTxHasFlags | kTxSendFlush | kTxSendFua | kTxCanMultiConn | kTxSendCache;
  if (structured_) flags |= kTxSendDf;
  if (info.read_only) {
    flags |= kTxReadOnly;
  } else {
    flags |= kTxSendTrim | kTxSendWriteZeroes;
    if (options_.advertise_fast_zero) flags |= kTxSendFastZero;
  }
  return flags;
}

absl::Status ServerHandshake::HandleOption(std::string* out) {
  if (shutting_down_ && option_ != kOptAbort) {
    if (option_ == kOptExportName) {
      return absl::UnavailableError("server shutting down during NBD_OPT_EXPORT_NAME");
    }
    ReplyError(out, kRepErrShutdown, "server is shutting down");
    return absl::OkStatus();
  }
  if (options_.tls == TlsMode::kRequire && !tls_active_ && option_ != kOptStartTls &&
      option_ != kOptAbort) {
    if (option_ == kOptExportName) {
      return absl::PermissionDeniedError("NBD_OPT_EXPORT_NAME before NBD_OPT_STARTTLS");
    }
    ReplyError(out, kRepErrTlsReqd, "TLS is required: send NBD_OPT_STARTTLS first");
    return absl::OkStatus();
  }
  switch (option_) {
    case kOptStartTls:
      HandleStartTls(out);
      return absl::OkStatus();
    case kOptExportName:
      return HandleExportName(out);
    case kOptAbort:
      // Any payload is ignored, as the protocol asks.
      Reply(out, kRepAck, "");
      state_ = State::kClosed;
      return absl::OkStatus();
    case kOptList:
      HandleList(out);
      return absl::OkStatus();
    case kOptInfo:
    case kOptGo:
      HandleInfoOrGo(out);
      return absl::OkStatus();
    case kOptStructuredReply:
      if (!buf_.empty()) {
        ReplyError(out, kRepErrInvalid, "NBD_OPT_STRUCTURED_REPLY takes no data");
      } else {
        structured_ = true;
        Reply(out, kRepAck, "");
      }
      return absl::OkStatus();
    case kOptListMetaContext:
    case kOptSetMetaContext:
      HandleMetaContext(out);
      return absl::OkStatus();
    default:
      ReplyError(out, kRepErrUnsup, absl::StrCat("option ", option_, " is not supported"));
      return absl::OkStatus();
  }
}

absl::Status ServerHandshake::HandleExportName(std::string* out) {
  const std::string name = buf_;
  absl::StatusOr<ExportInfo> info = exports_->Find(name);
  if (!info.ok()) {
    return absl::NotFoundError(absl::StrCat("NBD_OPT_EXPORT_NAME: ", info.status().message()));
  }
  uint32_t refusal = 0;
  std::string why;
  if (!Allowed(*info, &refusal, &why, &info->read_only)) {
    return absl::PermissionDeniedError(absl::StrCat("NBD_OPT_EXPORT_NAME: ", why));
  }
  absl::StatusOr<std::shared_ptr<BlockDevice>> device = exports_->Open(name);
  if (!device.ok() || *device == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("NBD_OPT_EXPORT_NAME: cannot open '", name,
                     "': ", device.ok() ? "no device" : std::string(device.status().message())));
  }
  session_.info = *std::move(info);
  SanitizeBlockSizes(&session_.info, options_.max_payload);
  session_.device = *std::move(device);
  session_.transmission_flags = TransmissionFlags(session_.info);
  session_.structured_replies = structured_;
  session_.base_allocation = meta_base_allocation_ && meta_export_ == name;
  session_.block_size_negotiated = false;
  PutU64(out, session_.info.size_bytes);
  PutU16(out, session_.transmission_flags);
  if (!no_zeroes_) out->append(kExportNameReplyPad, '\0');
  state_ = State::kTransmission;
  return absl::OkStatus();
}

void ServerHandshake::HandleList(std::string* out) {
  if (!buf_.empty()) {
    ReplyError(out, kRepErrInvalid, "NBD_OPT_LIST takes no data");
    return;
  }
  for (const ExportInfo& e : exports_->List()) {
    if (e.name.size() > kMaxStringLength) continue;
    uint32_t refusal = 0;
    std::string why;
    if (!Allowed(e, &refusal, &why)) continue;  // a client sees only what it may open
    std::string data;
    PutU32(&data, static_cast<uint32_t>(e.name.size()));
    data += e.name;
    data += e.description.substr(0, kMaxStringLength);
    Reply(out, kRepServer, data);
  }
  Reply(out, kRepAck, "");
}

// The NBD_REP_INFO replies of NBD_OPT_INFO / NBD_OPT_GO: the export's size and flags, its name
// and description when asked, its block sizes always.
void ServerHandshake::ReplyInfo(std::string* out, const ExportInfo& info, uint16_t tx_flags,
                                bool want_name, bool want_description) const {
  std::string data;
  PutU16(&data, kInfoExport);
  PutU64(&data, info.size_bytes);
  PutU16(&data, tx_flags);
  Reply(out, kRepInfo, data);
  if (want_name) {
    data.clear();
    PutU16(&data, kInfoName);
    data += info.name.substr(0, kMaxStringLength);
    Reply(out, kRepInfo, data);
  }
  if (want_description && !info.description.empty()) {
    data.clear();
    PutU16(&data, kInfoDescription);
    data += info.description.substr(0, kMaxStringLength);
    Reply(out, kRepInfo, data);
  }
  // Block sizes are always sent: the server does enforce the minimum alignment.
  data.clear();
  PutU16(&data, kInfoBlockSize);
  PutU32(&data, info.min_block);
  PutU32(&data, info.preferred_block);
  PutU32(&data, info.max_block);
  Reply(out, kRepInfo, data);
}

void ServerHandshake::HandleInfoOrGo(std::string* out) {
  const char* p = buf_.data();
  const size_t len = buf_.size();
  const char* what = option_ == kOptGo ? "NBD_OPT_GO" : "NBD_OPT_INFO";
  if (len < 6) {
    ReplyError(out, kRepErrInvalid, absl::StrCat(what, " payload too short"));
    return;
  }
  const uint32_t name_len = GetU32(p);
  if (name_len > len - 6 || name_len > kMaxStringLength) {
    ReplyError(out, kRepErrInvalid, absl::StrCat(what, " export name length is invalid"));
    return;
  }
  const std::string name = NameString(p + 4, name_len);
  const uint16_t n_requests = GetU16(p + 4 + name_len);
  if (len != 4 + static_cast<size_t>(name_len) + 2 + 2 * static_cast<size_t>(n_requests)) {
    ReplyError(out, kRepErrInvalid,
               absl::StrCat(what, " information request count does not match its length"));
    return;
  }
  bool want_name = false, want_description = false, want_block_size = false;
  for (uint16_t i = 0; i < n_requests; ++i) {
    switch (GetU16(p + 6 + name_len + 2 * i)) {
      case kInfoName:
        want_name = true;
        break;
      case kInfoDescription:
        want_description = true;
        break;
      case kInfoBlockSize:
        want_block_size = true;
        break;
      default:
        break;  // NBD_INFO_EXPORT is always sent; unknown requests are ignored
    }
  }

  absl::StatusOr<ExportInfo> found = exports_->Find(name);
  if (!found.ok()) {
    const uint32_t type = found.status().code() == absl::StatusCode::kPermissionDenied
                              ? kRepErrPolicy
                              : kRepErrUnknown;
    ReplyError(out, type, absl::StrCat("export '", name, "': ", found.status().message()));
    return;
  }
  ExportInfo info = *std::move(found);
  uint32_t refusal = 0;
  std::string why;
  if (!Allowed(info, &refusal, &why, &info.read_only)) {
    ReplyError(out, refusal, why);
    return;
  }
  SanitizeBlockSizes(&info, options_.max_payload);
  std::shared_ptr<BlockDevice> device;
  if (option_ == kOptGo) {
    absl::StatusOr<std::shared_ptr<BlockDevice>> opened = exports_->Open(name);
    if (!opened.ok() || *opened == nullptr) {
      ReplyError(out, kRepErrUnknown,
                 absl::StrCat("cannot open export '", name, "': ",
                              opened.ok() ? "no device" : std::string(opened.status().message())));
      return;
    }
    device = *std::move(opened);
  }

  const uint16_t tx_flags = TransmissionFlags(info);
  ReplyInfo(out, info, tx_flags, want_name, want_description);
  Reply(out, kRepAck, "");

  if (option_ == kOptGo) {
    session_.info = std::move(info);
    session_.device = std::move(device);
    session_.transmission_flags = tx_flags;
    session_.structured_replies = structured_;
    session_.base_allocation = meta_base_allocation_ && meta_export_ == name;
    session_.block_size_negotiated = want_block_size;
    state_ = State::kTransmission;
  }
}

void ServerHandshake::HandleMetaContext(std::string* out) {
  const bool set = option_ == kOptSetMetaContext;
  if (set) {
    // The selection is replaced even when this request fails.
    meta_export_.clear();
    meta_base_allocation_ = false;
  }
  if (!structured_) {
    ReplyError(out, kRepErrInvalid, "negotiate NBD_OPT_STRUCTURED_REPLY first");
    return;
  }
  const char* p = buf_.data();
  const size_t len = buf_.size();
  if (len < 8) {
    ReplyError(out, kRepErrInvalid, "meta context payload too short");
    return;
  }
  const uint32_t name_len = GetU32(p);
  if (name_len > len - 8 || name_len > kMaxStringLength) {
    ReplyError(out, kRepErrInvalid, "meta context export name length is invalid");
    return;
  }
  const std::string name = NameString(p + 4, name_len);
  size_t pos = 4 + name_len;
  const uint32_t n_queries = GetU32(p + pos);
  pos += 4;
  bool match_all = n_queries == 0;
  bool match_base = false;
  for (uint32_t i = 0; i < n_queries; ++i) {
    if (len - pos < 4) {
      ReplyError(out, kRepErrInvalid, "meta context query list is truncated");
      return;
    }
    const uint32_t q_len = GetU32(p + pos);
    pos += 4;
    if (q_len > len - pos || q_len > kMaxStringLength) {
      ReplyError(out, kRepErrInvalid, "meta context query length is invalid");
      return;
    }
    const std::string query(p + pos, q_len);
    pos += q_len;
    if (query.find(':') == std::string::npos) {
      ReplyError(out, kRepErrInvalid,
                 absl::StrCat("meta context query '", query, "' has no namespace"));
      return;
    }
    if (query == kBaseAllocation) match_base = true;
    // "base:" is a wildcard when listing and selects nothing when setting.
    if (!set && query == "base:") match_base = true;
    // Queries in other namespaces (qemu:, x-...) are ignored.
  }
  if (pos != len) {
    ReplyError(out, kRepErrInvalid, "meta context payload has trailing bytes");
    return;
  }
  absl::StatusOr<ExportInfo> found = exports_->Find(name);
  if (!found.ok()) {
    ReplyError(out, kRepErrUnknown,
               absl::StrCat("export '", name, "': ", found.status().message()));
    return;
  }
  if (match_all && !set) match_base = true;
  if (match_base) {
    std::string data;
    PutU32(&data, set ? kBaseAllocationId : 0);
    data += kBaseAllocation;
    Reply(out, kRepMetaContext, data);
  }
  if (set) {
    meta_export_ = name;
    meta_base_allocation_ = match_base;
  }
  Reply(out, kRepAck, "");
}

}  // namespace ringcache::gateway::nbd
