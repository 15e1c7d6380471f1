// File: the small file interface the cache node's slot store does its I/O through (LevelDB's
// Env, RocksDB's FileSystem), so tests can inject storage faults in-process: fail an fdatasync,
// fail writes, or drop every write not yet synced (a power cut). Production uses PosixFile.
//
// Thread-safety: a File's methods may be called from several threads at once (pread/pwrite at
// distinct offsets, fdatasync), as with a plain file descriptor.
#ifndef RINGCACHE_COMMON_FILE_H_
#define RINGCACHE_COMMON_FILE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <sys/uio.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace ringcache {

class File {
 public:
  virtual ~File() = default;
  // Reads exactly `len` bytes at `off` (a short file is kOutOfRange).
  virtual absl::Status PRead(void* buf, size_t len, uint64_t off) const = 0;
  // Reads the contiguous range at `off` into the `n` buffers in order (a scatter read: one
  // system call for a run of adjacent blocks). The default reads buffer by buffer with PRead.
  virtual absl::Status PReadV(const struct iovec* iov, int n, uint64_t off) const;
  // Writes exactly `len` bytes at `off`; not durable until Sync().
  virtual absl::Status PWrite(const void* buf, size_t len, uint64_t off) = 0;
  // fdatasync: every earlier PWrite is durable when it returns OK.
  virtual absl::Status Sync() = 0;
  // Size in bytes (a block device's capacity).
  virtual absl::StatusOr<uint64_t> Size() const = 0;
  // Sets a regular file's size to `size` bytes with allocated (not sparse) space; a smaller size
  // cuts the file there.
  virtual absl::Status Preallocate(uint64_t size) = 0;
  virtual bool IsBlockDevice() const = 0;
};

// True if `path` names a block device (false if it is anything else or does not exist).
bool IsBlockDevicePath(const std::string& path);

// Opens (creating with `create`) a file or block device for direct positional I/O.
absl::StatusOr<std::unique_ptr<File>> OpenPosixFile(const std::string& path, bool create);

// Wraps a File to inject faults. Unsynced writes are kept in memory until Sync() (so they can be
// dropped), then written through; reads see them (as a page cache would).
class FaultInjectionFile : public File {
 public:
  explicit FaultInjectionFile(std::unique_ptr<File> base) : base_(std::move(base)) {}
  // The next `n` Sync() calls fail with EIO, and the writes they cover are lost (Linux drops
  // the dirty pages of a failed writeback: a retried fdatasync then succeeds without them).
  void FailNextSyncs(int n) { fail_syncs_.store(n); }
  // Every PWrite fails with EIO from now on (while `on`).
  void FailWrites(bool on) { fail_writes_.store(on); }
  // Forgets every write not synced yet (a crash before fdatasync).
  void DropUnsynced();

  absl::Status PRead(void* buf, size_t len, uint64_t off) const override;
  absl::Status PWrite(const void* buf, size_t len, uint64_t off) override;
  absl::Status Sync() override;
  absl::StatusOr<uint64_t> Size() const override { return base_->Size(); }
  absl::Status Preallocate(uint64_t size) override { return base_->Preallocate(size); }
  bool IsBlockDevice() const override { return base_->IsBlockDevice(); }

 private:
  std::unique_ptr<File> base_;
  std::atomic<int> fail_syncs_{0};
  std::atomic<bool> fail_writes_{false};
  mutable absl::Mutex mu_;
  // Unsynced writes by offset (a later write replaces an earlier one at the same offset).
  std::map<uint64_t, std::string> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_FILE_H_
