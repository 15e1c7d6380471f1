// Test-only in-memory block devices and an export provider over them, used by the NBD server's
// tests and by nbd-test-server. Not part of the product: the product's BlockDevice is the router.
//
// MemDevice stores data sparsely in 4 KiB blocks allocated on first write, so a large export
// costs nothing until written, and it remembers which blocks were ever written so BlockStatus can
// report never-written (or trimmed) ranges as holes:
//   - never written / trimmed / zeroed with may_trim: hole + zero
//   - zeroed without may_trim (NBD_CMD_FLAG_NO_HOLE): allocated, zero
//   - written: allocated (status 0)
// Partial-block trims and zeroes clear the bytes and keep the block allocated.
//
// Thread-safety: MemDevice and MemExportProvider are thread-safe.
#ifndef RINGCACHE_GATEWAY_TESTING_MEM_DEVICE_H_
#define RINGCACHE_GATEWAY_TESTING_MEM_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "gateway/block_device.h"

namespace ringcache::gateway::testing {

class MemDevice : public BlockDevice {
 public:
  static constexpr uint32_t kBlockSize = 4096;

  explicit MemDevice(uint64_t size_bytes);

  absl::Status Read(uint64_t offset, uint32_t len, char* buf) override;
  absl::Status Write(uint64_t offset, uint32_t len, const char* buf, bool fua) override;
  absl::Status Trim(uint64_t offset, uint32_t len) override;
  absl::Status WriteZeroes(uint64_t offset, uint32_t len, bool may_trim, bool fua) override;
  absl::Status Flush() override;
  absl::Status Cache(uint64_t offset, uint32_t len) override;
  absl::Status BlockStatus(uint64_t offset, uint32_t len, std::vector<Extent>* out) override;

  uint64_t size() const { return size_; }
  // Counters, for tests.
  uint64_t flushes() const { return flushes_.load(); }
  uint64_t fua_writes() const { return fua_writes_.load(); }
  uint64_t caches() const { return caches_.load(); }
  // Returns how many 4 KiB blocks hold storage (data or allocated zeros).
  size_t AllocatedBlocksForTest() const;

 private:
  // A present block: `data` null means "allocated, reads as zeros".
  struct Block {
    std::unique_ptr<char[]> data;
  };
  absl::Status CheckRange(uint64_t offset, uint32_t len) const;
  // Zeroes [offset, offset+len); whole blocks are dropped (may_trim) or kept as allocated zeros.
  void ZeroRangeLocked(uint64_t offset, uint64_t len, bool may_trim)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t size_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Block> blocks_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> flushes_{0};
  std::atomic<uint64_t> fua_writes_{0};
  std::atomic<uint64_t> caches_{0};
};

// Serves a fixed set of MemDevices by name. Open() returns the shared device, so every
// connection to an export sees the same bytes (as CAN_MULTI_CONN promises).
class MemExportProvider : public ExportProvider {
 public:
  // Adds an export; `info.size_bytes` sets the device size. Returns the device (shared).
  std::shared_ptr<MemDevice> AddExport(const ExportInfo& info);

  absl::StatusOr<ExportInfo> Find(const std::string& name) override;
  std::vector<ExportInfo> List() override;
  absl::StatusOr<std::shared_ptr<BlockDevice>> Open(const std::string& name) override;

 private:
  struct Entry {
    ExportInfo info;
    std::shared_ptr<MemDevice> device;
  };
  absl::Mutex mu_;
  std::map<std::string, Entry> exports_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringcache::gateway::testing

#endif  // RINGCACHE_GATEWAY_TESTING_MEM_DEVICE_H_
