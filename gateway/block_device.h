// The seam between the NBD server and what serves a VDI's bytes: ExportProvider finds VDIs by
// export name; BlockDevice serves one VDI. The product implementation is the gateway's router
// (gateway/router.h), which splits requests by object and sends them to cache nodes.
//
// Thread-safety: implementations must be thread-safe. The NBD server calls a device from many
// worker threads at once (many requests in flight per connection, several connections per VDI).
#ifndef RINGCACHE_GATEWAY_BLOCK_DEVICE_H_
#define RINGCACHE_GATEWAY_BLOCK_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringcache::gateway {

struct ExportInfo {
  std::string name;  // NBD export name = VDI name
  std::string description;
  uint32_t vdi_id = 0;
  uint64_t size_bytes = 0;
  uint32_t min_block = 512;  // NBD_INFO_BLOCK_SIZE minimum
  uint32_t preferred_block = 4096;
  uint32_t max_block = 32u << 20;
  bool read_only = false;
  // Who may open the export (docs/security.md, "Who may open what"): client identities (TLS
  // certificate CN or PSK identity) read-write and read-only. Both empty: any client with an
  // identity when the server runs TLS, any client when it does not. An export with a list is
  // served over TLS only. A public export is open to any client; the lists do not apply.
  std::vector<std::string> allowed_clients;
  std::vector<std::string> read_only_clients;
  bool public_export = false;
};

// One extent of NBD "base:allocation" block status.
struct Extent {
  uint32_t length = 0;
  bool hole = false;  // NBD_STATE_HOLE: never written (or trimmed)
  bool zero = false;  // NBD_STATE_ZERO: reads as zeros
};

// Errors: kInvalidArgument -> NBD_EINVAL, kOutOfRange/kResourceExhausted -> NBD_ENOSPC,
// kPermissionDenied -> NBD_EPERM, anything else -> NBD_EIO. Range checks against the export size
// are done by the NBD server before calling (read past end -> EINVAL, write past end -> ENOSPC).
class BlockDevice {
 public:
  virtual ~BlockDevice() = default;
  // Reads `len` bytes at `offset` into `buf` (caller-owned, at least len bytes).
  virtual absl::Status Read(uint64_t offset, uint32_t len, char* buf) = 0;
  // Starts a read that completes on another thread, for a caller that must not block (the NBD
  // connection's reader): returns true and later runs `done` once — OK with the data in `buf`,
  // or an error, after which the caller does the read with Read. Returns false without calling
  // `done` when the device has no such path for this range. The default has none.
  virtual bool ReadAsync(uint64_t offset, uint32_t len, char* buf,
                         absl::AnyInvocable<void(absl::Status)> done) {
    (void)offset, (void)len, (void)buf, (void)done;
    return false;
  }
  // Writes; returns only when the data is durable (every acknowledged write is durable, so FUA
  // needs nothing extra, but it is passed on).
  virtual absl::Status Write(uint64_t offset, uint32_t len, const char* buf, bool fua) = 0;
  // Discards the range (it may then read as zeros).
  virtual absl::Status Trim(uint64_t offset, uint32_t len) = 0;
  // Makes the range read as zeros; `may_trim` allows deallocating it.
  virtual absl::Status WriteZeroes(uint64_t offset, uint32_t len, bool may_trim, bool fua) = 0;
  // A barrier: every write acknowledged before it is durable (already true in ringcache).
  virtual absl::Status Flush() = 0;
  // Prefetches the range into the cache (NBD_CMD_CACHE).
  virtual absl::Status Cache(uint64_t offset, uint32_t len) = 0;
  // Describes allocation of [offset, offset+len) as consecutive extents covering at least the
  // first byte (may stop early, as NBD allows).
  virtual absl::Status BlockStatus(uint64_t offset, uint32_t len, std::vector<Extent>* out) = 0;
};

class ExportProvider {
 public:
  virtual ~ExportProvider() = default;
  // Returns the export named `name`, or kNotFound.
  virtual absl::StatusOr<ExportInfo> Find(const std::string& name) = 0;
  virtual std::vector<ExportInfo> List() = 0;
  // Opens the device serving `name` for one connection.
  virtual absl::StatusOr<std::shared_ptr<BlockDevice>> Open(const std::string& name) = 0;
};

}  // namespace ringcache::gateway

#endif  // RINGCACHE_GATEWAY_BLOCK_DEVICE_H_
