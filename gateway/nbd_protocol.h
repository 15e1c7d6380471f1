// NBD wire protocol, server side: constants, the fixed-newstyle handshake as a byte-fed state
// machine, the transmission request header parser and checker, and reply builders. Pure code: no
// sockets, no threads, no clock. The only outside call is into the ExportProvider given to the
// handshake (Find/List/Open), so the fuzzer and unit tests drive it with fakes.
//
// Layout of every message follows the NBD protocol document (NetworkBlockDevice/nbd,
// doc/proto.md); integers are big-endian on the wire.
//
// Thread-safety: free functions are thread-safe. ServerHandshake is thread-compatible (one owner
// thread, normally the connection's reader thread).
#ifndef RINGCACHE_GATEWAY_NBD_PROTOCOL_H_
#define RINGCACHE_GATEWAY_NBD_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gateway/block_device.h"

namespace ringcache::gateway::nbd {

// ---- Magic numbers -------------------------------------------------------------------------
inline constexpr uint64_t kInitMagic = 0x4e42444d41474943ULL;    // "NBDMAGIC"
inline constexpr uint64_t kOptionMagic = 0x49484156454F5054ULL;  // "IHAVEOPT"
inline constexpr uint64_t kOptionReplyMagic = 0x3e889045565a9ULL;
inline constexpr uint32_t kRequestMagic = 0x25609513;
inline constexpr uint32_t kSimpleReplyMagic = 0x67446698;
inline constexpr uint32_t kStructuredReplyMagic = 0x668e33ef;

// ---- Handshake flags (server, 16 bits) and client flags (32 bits) --------------------------
inline constexpr uint16_t kFlagFixedNewstyle = 1 << 0;
inline constexpr uint16_t kFlagNoZeroes = 1 << 1;
inline constexpr uint32_t kClientFlagFixedNewstyle = 1 << 0;
inline constexpr uint32_t kClientFlagNoZeroes = 1 << 1;

// ---- Transmission flags (16 bits) -----------------------------------------------------------
inline constexpr uint16_t kTxHasFlags = 1 << 0;
inline constexpr uint16_t kTxReadOnly = 1 << 1;
inline constexpr uint16_t kTxSendFlush = 1 << 2;
inline constexpr uint16_t kTxSendFua = 1 << 3;
inline constexpr uint16_t kTxRotational = 1 << 4;
inline constexpr uint16_t kTxSendTrim = 1 << 5;
inline constexpr uint16_t kTxSendWriteZeroes = 1 << 6;
inline constexpr uint16_t kTxSendDf = 1 << 7;
inline constexpr uint16_t kTxCanMultiConn = 1 << 8;
inline constexpr uint16_t kTxSendResize = 1 << 9;
inline constexpr uint16_t kTxSendCache = 1 << 10;
inline constexpr uint16_t kTxSendFastZero = 1 << 11;

// ---- Options ----------------------------------------------------------------------------------
inline constexpr uint32_t kOptExportName = 1;
inline constexpr uint32_t kOptAbort = 2;
inline constexpr uint32_t kOptList = 3;
inline constexpr uint32_t kOptPeekExport = 4;
inline constexpr uint32_t kOptStartTls = 5;
inline constexpr uint32_t kOptInfo = 6;
inline constexpr uint32_t kOptGo = 7;
inline constexpr uint32_t kOptStructuredReply = 8;
inline constexpr uint32_t kOptListMetaContext = 9;
inline constexpr uint32_t kOptSetMetaContext = 10;

// ---- Option replies ---------------------------------------------------------------------------
inline constexpr uint32_t kRepAck = 1;
inline constexpr uint32_t kRepServer = 2;
inline constexpr uint32_t kRepInfo = 3;
inline constexpr uint32_t kRepMetaContext = 4;
inline constexpr uint32_t kRepErrBit = 1u << 31;
inline constexpr uint32_t kRepErrUnsup = kRepErrBit | 1;
inline constexpr uint32_t kRepErrPolicy = kRepErrBit | 2;
inline constexpr uint32_t kRepErrInvalid = kRepErrBit | 3;
inline constexpr uint32_t kRepErrPlatform = kRepErrBit | 4;
inline constexpr uint32_t kRepErrTlsReqd = kRepErrBit | 5;
inline constexpr uint32_t kRepErrUnknown = kRepErrBit | 6;
inline constexpr uint32_t kRepErrShutdown = kRepErrBit | 7;
inline constexpr uint32_t kRepErrBlockSizeReqd = kRepErrBit | 8;
inline constexpr uint32_t kRepErrTooBig = kRepErrBit | 9;

// ---- NBD_INFO types (in NBD_OPT_INFO / NBD_OPT_GO) ---------------------------------------------
inline constexpr uint16_t kInfoExport = 0;
inline constexpr uint16_t kInfoName = 1;
inline constexpr uint16_t kInfoDescription = 2;
inline constexpr uint16_t kInfoBlockSize = 3;

// ---- Commands and command flags ---------------------------------------------------------------
inline constexpr uint16_t kCmdRead = 0;
inline constexpr uint16_t kCmdWrite = 1;
inline constexpr uint16_t kCmdDisc = 2;
inline constexpr uint16_t kCmdFlush = 3;
inline constexpr uint16_t kCmdTrim = 4;
inline constexpr uint16_t kCmdCache = 5;
inline constexpr uint16_t kCmdWriteZeroes = 6;
inline constexpr uint16_t kCmdBlockStatus = 7;

inline constexpr uint16_t kCmdFlagFua = 1 << 0;
inline constexpr uint16_t kCmdFlagNoHole = 1 << 1;
inline constexpr uint16_t kCmdFlagDf = 1 << 2;
inline constexpr uint16_t kCmdFlagReqOne = 1 << 3;
inline constexpr uint16_t kCmdFlagFastZero = 1 << 4;

// ---- Structured replies ------------------------------------------------------------------------
inline constexpr uint16_t kReplyFlagDone = 1 << 0;
inline constexpr uint16_t kReplyTypeNone = 0;
inline constexpr uint16_t kReplyTypeOffsetData = 1;
inline constexpr uint16_t kReplyTypeOffsetHole = 2;
inline constexpr uint16_t kReplyTypeBlockStatus = 5;
inline constexpr uint16_t kReplyTypeError = (1 << 15) | 1;
inline constexpr uint16_t kReplyTypeErrorOffset = (1 << 15) | 2;

// ---- base:allocation states
// ----------------------------------------------------------------------
inline constexpr uint32_t kStateHole = 1 << 0;
inline constexpr uint32_t kStateZero = 1 << 1;

// ---- Error values (NBD errno, not host errno) --------------------------------------------------
inline constexpr uint32_t kEperm = 1;
inline constexpr uint32_t kEio = 5;
inline constexpr uint32_t kEnomem = 12;
inline constexpr uint32_t kEinval = 22;
inline constexpr uint32_t kEnospc = 28;
inline constexpr uint32_t kEoverflow = 75;
inline constexpr uint32_t kEnotsup = 95;
inline constexpr uint32_t kEshutdown = 108;

// ---- Sizes and limits -------------------------------------------------------------------------
inline constexpr size_t kGreetingSize = 18;         // magic, magic, handshake flags
inline constexpr size_t kOptionHeaderSize = 16;     // magic, option, length
inline constexpr size_t kExportNameReplyPad = 124;  // zeroes after NBD_OPT_EXPORT_NAME's reply
inline constexpr size_t kRequestHeaderSize = 28;
inline constexpr size_t kSimpleReplyHeaderSize = 16;
inline constexpr size_t kStructuredReplyHeaderSize = 20;
inline constexpr uint32_t kMaxStringLength = 4096;        // names, queries, messages
inline constexpr uint32_t kMaxPayloadLength = 32u << 20;  // READ/WRITE/CACHE length cap
inline constexpr char kBaseAllocation[] = "base:allocation";
// Context id this server gives base:allocation in NBD_OPT_SET_META_CONTEXT replies.
inline constexpr uint32_t kBaseAllocationId = 1;

// Returns the command's lower-case name ("read", "write", ...; "unknown" otherwise).
const char* CommandName(uint16_t type);
// Returns the NBD errno's lower-case name ("einval", ...; "eio" for anything unnamed).
const char* ErrnoName(uint32_t error);
// Maps a BlockDevice status to an NBD errno (0 for OK): kInvalidArgument -> EINVAL,
// kOutOfRange/kResourceExhausted -> ENOSPC, kPermissionDenied -> EPERM, anything else -> EIO
// (the contract in block_device.h).
uint32_t ErrnoFromStatus(const absl::Status& status);

// Big-endian helpers. Get* REQUIRE at least 2/4/8 readable bytes at `p`.
void PutU16(std::string* out, uint16_t v);
void PutU32(std::string* out, uint32_t v);
void PutU64(std::string* out, uint64_t v);
uint16_t GetU16(const char* p);
uint32_t GetU32(const char* p);
uint64_t GetU64(const char* p);

// ---- Handshake ---------------------------------------------------------------------------------

// What the server does with NBD_OPT_STARTTLS (as qemu-nbd's and nbdkit's --tls):
//   kOff      no TLS: STARTTLS is answered NBD_REP_ERR_UNSUP;
//   kOn       TLS offered: the client chooses; exports with an access list still need TLS;
//   kRequire  every option but STARTTLS and ABORT is refused NBD_REP_ERR_TLS_REQD until TLS is
//             up, and NBD_OPT_EXPORT_NAME (which cannot be refused) ends the session.
enum class TlsMode { kOff, kOn, kRequire };
// Parses "off", "on" or "require".
absl::StatusOr<TlsMode> ParseTlsMode(const std::string& text);
const char* TlsModeName(TlsMode mode);

struct HandshakeOptions {
  // Option payloads longer than this are discarded unread and answered NBD_REP_ERR_TOO_BIG
  // (NBD_OPT_EXPORT_NAME, which cannot be answered with an error, ends the session instead).
  uint32_t max_option_length = 64 * 1024;
  // A client sending more options than this is treated as abusive: the session ends.
  uint32_t max_options = 4096;
  // Advertise NBD_FLAG_SEND_FAST_ZERO (see nbd_server.h for what the server does with it).
  bool advertise_fast_zero = true;
  // The largest READ/WRITE the server accepts; the advertised maximum block size never exceeds
  // it. REQUIRES: 4096 <= max_payload <= kMaxPayloadLength.
  uint32_t max_payload = kMaxPayloadLength;
  TlsMode tls = TlsMode::kOff;
};

// What the handshake agreed on; handed to the transmission phase.
struct Session {
  ExportInfo info;
  std::shared_ptr<BlockDevice> device;  // opened by the handshake through the provider
  uint16_t transmission_flags = 0;
  bool structured_replies = false;
  // base:allocation was selected by NBD_OPT_SET_META_CONTEXT for this very export.
  bool base_allocation = false;
  // The client asked for NBD_INFO_BLOCK_SIZE in NBD_OPT_GO (it promised to honour the sizes).
  bool block_size_negotiated = false;
};

// Server half of the fixed newstyle handshake. Usage:
//   ServerHandshake hs(provider, options);
//   hs.Start(&out);                        // send `out`
//   while (!hs.in_transmission() && !hs.closed()) {
//     read up to hs.BytesWanted() bytes; auto n = hs.Feed(buf, len, &out); send `out`;
//     if (!n.ok()) close the connection;
//     if (hs.state() == State::kStartTls) { run the TLS handshake; hs.TlsStarted(identity); }
//   }
// Feed never consumes past the end of the handshake, so reading exactly BytesWanted() bytes
// leaves the first transmission request unread.
class ServerHandshake {
 public:
  enum class State {
    kClientFlags,    // waiting for the 32-bit client flags
    kOptionHeader,   // waiting for the 16-byte option header
    kOptionData,     // collecting an option payload
    kOptionDiscard,  // dropping an over-long option payload
    kStartTls,       // NBD_OPT_STARTTLS acknowledged: the caller runs the TLS handshake now
    kTransmission,   // done: Session() is valid
    kClosed,         // NBD_OPT_ABORT answered, or a fatal error; close the connection
  };

  // `exports` is not owned and must outlive this object.
  ServerHandshake(ExportProvider* exports, HandshakeOptions options);

  // Appends the server greeting (18 bytes) to `out`. Call once, before Feed.
  void Start(std::string* out);
  // Consumes bytes from the client and appends the bytes to send back to `out`. Returns how many
  // bytes were consumed (fewer than `len` only once the transmission phase or kClosed is reached).
  // An error means the session must end: send `out`, then close. The error names the problem.
  absl::StatusOr<size_t> Feed(const char* data, size_t len, std::string* out);
  // Returns how many more bytes the current step needs (0 once done or closed).
  size_t BytesWanted() const;

  // Called once the TLS handshake after NBD_OPT_STARTTLS succeeded. `client` is who the client
  // proved to be (a certificate's CN, a PSK identity; empty: anonymous). Everything negotiated
  // before (structured replies, meta contexts) is forgotten, as the protocol asks.
  // REQUIRES: state() == kStartTls.
  void TlsStarted(const std::string& client);
  bool tls_active() const { return tls_active_; }

  // While set, options other than NBD_OPT_ABORT are answered NBD_REP_ERR_SHUTDOWN.
  void set_shutting_down(bool v) { shutting_down_ = v; }

  State state() const { return state_; }
  bool in_transmission() const { return state_ == State::kTransmission; }
  bool closed() const { return state_ == State::kClosed; }
  // REQUIRES: in_transmission().
  const Session& session() const { return session_; }
  Session TakeSession() { return std::move(session_); }

 private:
  absl::Status HandleOption(std::string* out);
  absl::Status HandleExportName(std::string* out);
  // NBD_OPT_STARTTLS. Returns an error when the session must end.
  void HandleStartTls(std::string* out);
  // Whether this client may see `info` (public, or its identity on its lists); kRepErrTlsReqd /
  // kRepErrPolicy in *refusal with a message otherwise. *read_only (may be null): whether it
  // opens read-only (the export is, or the identity is on the read-only list).
  bool Allowed(const ExportInfo& info, uint32_t* refusal, std::string* why,
               bool* read_only = nullptr) const;
  void HandleList(std::string* out);
  void HandleInfoOrGo(std::string* out);
  void ReplyInfo(std::string* out, const ExportInfo& info, uint16_t tx_flags, bool want_name,
                 bool want_description) const;
  void HandleMetaContext(std::string* out);
  uint16_t TransmissionFlags(const ExportInfo& info) const;
  void Reply(std::string* out, uint32_t type, const std::string& data) const;
  void ReplyError(std::string* out, uint32_t type, const std::string& message) const;
  absl::Status Fail(absl::Status why);

  ExportProvider* const exports_;
  const HandshakeOptions options_;
  State state_ = State::kClientFlags;
  std::string buf_;             // bytes of the current step collected so far
  size_t need_ = 4;             // bytes the current step needs in total
  uint32_t option_ = 0;         // current option code
  uint32_t option_length_ = 0;  // its payload length
  uint64_t discard_left_ = 0;   // kOptionDiscard: bytes still to drop
  uint32_t options_seen_ = 0;
  bool started_ = false;
  bool no_zeroes_ = false;
  bool structured_ = false;
  bool shutting_down_ = false;
  bool tls_active_ = false;
  std::string client_;  // the client's TLS identity (empty: none proven)
  // Export named by the last NBD_OPT_SET_META_CONTEXT and whether it selected base:allocation.
  std::string meta_export_;
  bool meta_base_allocation_ = false;
  Session session_;
};

// ---- Transmission requests ----------------------------------------------------------------------

struct Request {
  uint16_t flags = 0;
  uint16_t type = 0;
  uint64_t handle = 0;  // the client's cookie, echoed in every reply
  uint64_t offset = 0;
  uint32_t length = 0;
};

// Parses a 28-byte request header. Returns kInvalidArgument for a wrong magic (the stream is then
// out of sync: the connection must be closed) or a short buffer.
absl::StatusOr<Request> ParseRequestHeader(const char* data, size_t len);

// Appends a request header (for clients and tests).
void AppendRequest(std::string* out, const Request& request);

// What the server knows about the session when checking a request.
struct RequestLimits {
  uint64_t export_size = 0;
  uint32_t min_block = 1;                    // alignment enforced on offset and length (power of 2)
  uint32_t max_block = kMaxPayloadLength;    // advertised cap for READ, WRITE and CACHE lengths
  uint32_t max_payload = kMaxPayloadLength;  // hard cap: a longer WRITE payload is never read
  uint16_t transmission_flags = 0;           // as sent to the client
  bool structured_replies = false;
  bool base_allocation = false;
};

RequestLimits LimitsFor(const Session& session, uint32_t max_payload = kMaxPayloadLength);

struct RequestCheck {
  uint32_t error = 0;       // NBD errno to reply with; 0 = go ahead
  uint64_t payload = 0;     // bytes of payload that follow the header on the wire
  bool close = false;       // the connection must end after replying (payload too large)
  const char* reason = "";  // human-readable cause when error != 0
};

// Checks a parsed request against the session: known command, flags valid for it, length caps
// (READ/WRITE/CACHE over max_block -> EINVAL), alignment, range (read/cache/trim/block status past
// the end -> EINVAL, write/write zeroes past the end -> ENOSPC, offset+length overflow counted as
// past the end), read-only (EPERM), BLOCK_STATUS without base:allocation (EINVAL). A WRITE whose
// payload exceeds max_payload gets close = true (its payload is never read). NBD_CMD_DISC always
// passes.
RequestCheck CheckRequest(const Request& request, const RequestLimits& limits);

// ---- Replies ------------------------------------------------------------------------------------

// Appends a simple reply header; for a successful READ the data follows it on the wire.
void AppendSimpleReply(std::string* out, uint32_t error, uint64_t handle);
// Appends a structured reply chunk header announcing `payload_length` bytes of payload.
void AppendStructuredHeader(std::string* out, uint16_t flags, uint16_t type, uint64_t handle,
                            uint32_t payload_length);
// Appends an NBD_REPLY_TYPE_NONE chunk with NBD_REPLY_FLAG_DONE.
void AppendStructuredNone(std::string* out, uint64_t handle);
// Appends the header and offset of an NBD_REPLY_TYPE_OFFSET_DATA chunk; `data_length` bytes of
// data must follow. REQUIRES: 0 < data_length <= 2^32 - 9.
void AppendOffsetDataHeader(std::string* out, uint16_t flags, uint64_t handle, uint64_t offset,
                            uint32_t data_length);
// Appends an NBD_REPLY_TYPE_ERROR chunk; the message is cut to kMaxStringLength bytes.
void AppendStructuredError(std::string* out, uint16_t flags, uint64_t handle, uint32_t error,
                           const std::string& message);

struct BlockStatusDescriptor {
  uint32_t length = 0;
  uint32_t flags = 0;
};
// Converts device extents for a request at [offset, offset+length) into descriptors: drops empty
// extents, merges neighbours with equal flags, clips the total to `length`, keeps at most one with
// `req_one` and at most `max_descriptors` otherwise. Never returns an empty list: if the device
// described nothing, one descriptor of `length` with status 0 ("unknown, allocated") is returned.
// REQUIRES: length > 0, max_descriptors > 0.
std::vector<BlockStatusDescriptor> ToDescriptors(const std::vector<Extent>& extents,
                                                 uint32_t length, bool req_one,
                                                 size_t max_descriptors);
// Appends an NBD_REPLY_TYPE_BLOCK_STATUS chunk. REQUIRES: !descriptors.empty().
void AppendBlockStatus(std::string* out, uint16_t flags, uint64_t handle, uint32_t context_id,
                       const std::vector<BlockStatusDescriptor>& descriptors);

}  // namespace ringcache::gateway::nbd

#endif  // RINGCACHE_GATEWAY_NBD_PROTOCOL_H_
