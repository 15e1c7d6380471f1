// The block data protocol between a gateway and a cache node: fixed binary frames over TCP for
// the hot path (read, write, trim), next to gRPC for everything else; the same frames carry a
// cache node's write-back log appends to a data node's log port. A cache node runs a
// connection's requests in arrival order and answers in that order, so a client may pipeline
// requests and match answers by order (gateway/data_channel.h); each connection is served on its
// own thread (cachenode/data_server.h). Byte order is little-endian; docs/data-protocol.md has
// the picture.
//
//   request  := RequestHeader (48 bytes) [payload: `length` bytes, writes only]
//   response := ResponseHeader (24 bytes) [message: message_len bytes] [data: data_len bytes]
//
// Every response carries its request's `tag`. A request flagged kMayReorder may be answered
// after requests that came later on the same connection (a read the node must fetch from the
// data nodes is run aside, so it does not hold up the cached reads behind it); all others are
// answered in arrival order.
//
// A response carries an absl status code and the ringcache error kind (common/errors.h), so a
// refusal (fenced, stale epoch, unknown VDI, ...) reaches the router typed, as over gRPC.
//
// Thread-safety: pure functions.
#ifndef RINGCACHE_COMMON_BLOCK_WIRE_H_
#define RINGCACHE_COMMON_BLOCK_WIRE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/errors.h"

namespace ringcache::wire {

inline constexpr uint32_t kRequestMagic = 0x32445243;   // "CRD2"
inline constexpr uint32_t kResponseMagic = 0x32535243;  // "CRS2"
inline constexpr size_t kRequestBytes = 48;
inline constexpr size_t kResponseBytes = 24;
inline constexpr uint32_t kMaxLength = 64u << 20;       // as the gRPC messages
inline constexpr uint32_t kMaxMessage = 64u << 10;

// kLogAppend, kStoreBlocks and kLoadBlocks travel only to a data node's log port
// (datanode/log_port.h). kLogAppend's payload is a serialized v1::LogAppendRequest, its answer's
// data a serialized v1::LogAppendResponse. kStoreBlocks (a destage or write-through write of
// blocks) and kLoadBlocks (a read of blocks), both node-api 2, are the store incarnation the
// sender means (EncodeStorePrefix) followed by a serialized v1::WriteBlocksRequest or
// v1::ReadBlocksRequest; the answer's data a serialized v1::WriteBlocksResponse or
// v1::ReadBlocksResponse. kStoreBlocksBatch (node-api 3) is kStoreBlocks for the writes of
// several objects at once, stored in one commit: the prefix, then a serialized
// v1::WriteBlocksBatchRequest; the answer's data a v1::WriteBlocksBatchResponse (one result per
// write: each is refused or stored alone).
enum class Op : uint8_t {
  kRead = 1,
  kWrite = 2,
  kTrim = 3,
  kZero = 4,
  kLogAppend = 5,
  kStoreBlocks = 6,
  kLoadBlocks = 7,
  kStoreBlocksBatch = 8,
};
inline constexpr Op kLastOp = Op::kStoreBlocksBatch;
// The ops only a data node's log port serves (a cache node's block data port refuses them).
inline bool ForDataNode(Op op) {
  return op == Op::kLogAppend || op == Op::kStoreBlocks || op == Op::kLoadBlocks ||
         op == Op::kStoreBlocksBatch;
}
// kStoreBlocks', kStoreBlocksBatch's and kLoadBlocks' payload prefix: a 2-byte little-endian length, then the store
// incarnation (Health's store_incarnation; empty: not checked). A node whose store has another
// closes the connection unanswered, as for an append's expect_store_incarnation.
std::string EncodeStorePrefix(const std::string& store_incarnation);
// Splits `payload` into the incarnation and the rest; kInvalidArgument when it is too short.
absl::Status DecodeStorePrefix(const std::string& payload, std::string* store_incarnation,
                               size_t* rest_at);
// Request flags.
inline constexpr uint8_t kMayReorder = 1;  // the answer may overtake (or be overtaken by) others

struct Request {
  Op op = Op::kRead;
  uint32_t vdi = 0;
  uint64_t object = 0;
  uint32_t offset = 0;
  uint32_t length = 0;
  uint32_t timeout_ms = 0;  // the sender gives up after this; a write must not start later
  uint64_t epoch = 0;       // the cache ring epoch the sender routed with (0: not stamped)
  uint8_t flags = 0;        // kMayReorder
  uint64_t tag = 0;         // echoed in the response
};

struct Response {
  absl::StatusCode code = absl::StatusCode::kOk;
  ErrorKind kind = ErrorKind::kNone;
  uint32_t message_len = 0;
  uint32_t data_len = 0;
  uint64_t tag = 0;  // the request's
};

void EncodeRequest(const Request& r, char out[kRequestBytes]);
// kInvalidArgument for a bad magic, op or length.
absl::Status DecodeRequest(const char in[kRequestBytes], Request* r);
void EncodeResponse(const Response& r, char out[kResponseBytes]);
absl::Status DecodeResponse(const char in[kResponseBytes], Response* r);

// The status a response stands for (`message`: its text).
absl::Status ToStatus(const Response& r, const std::string& message);
// The response header for `s` (message_len set from its message, capped at kMaxMessage).
Response FromStatus(const absl::Status& s, uint32_t data_len);

}  // namespace ringcache::wire

#endif  // RINGCACHE_COMMON_BLOCK_WIRE_H_
