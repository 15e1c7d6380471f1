// Injected disk faults for fault tests of real processes (the fault checker's slow-data,
// full-data, slow-cache and full-cache nemeses). A daemon started with `--disk-faults-file PATH`
// re-reads PATH every 100 ms; its lines
//   sync_delay_ms=N   every fdatasync of the node's store waits N ms first (a slow disk)
//   full=1            every write fails with ENOSPC (a full disk)
// apply until the file changes; no file means no fault. The data node applies them through its
// RocksDB file system (datanode/fault_fs.h), the cache node through its SSD file (DiskFaultFile).
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_COMMON_DISK_FAULTS_H_
#define RINGCACHE_COMMON_DISK_FAULTS_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/file.h"

namespace ringcache {

struct DiskFaults {
  int sync_delay_ms = 0;
  bool full = false;
  bool operator==(const DiskFaults&) const = default;
};

// Reads `path` (no file: no faults).
DiskFaults ReadDiskFaults(const std::string& path);

class DiskFaultsWatcher {
 public:
  // Calls apply(faults) now and whenever `path` says something else, every 100 ms.
  DiskFaultsWatcher(std::string path, std::function<void(const DiskFaults&)> apply);
  ~DiskFaultsWatcher();
  DiskFaultsWatcher(const DiskFaultsWatcher&) = delete;
  DiskFaultsWatcher& operator=(const DiskFaultsWatcher&) = delete;

 private:
  void Poll();
  const std::string path_;
  const std::function<void(const DiskFaults&)> apply_;
  DiskFaults last_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The faults in force, shared by a watcher and the files it slows or fills.
struct DiskFaultsCell {
  std::atomic<int> sync_delay_ms{0};
  std::atomic<bool> full{false};
  void Set(const DiskFaults& f) {
    sync_delay_ms.store(f.sync_delay_ms);
    full.store(f.full);
  }
};

// A File whose syncs can be slowed and whose writes and syncs can fail with ENOSPC, as `cell`
// says (the cache node's SSD file under --disk-faults-file).
class DiskFaultFile : public File {
 public:
  DiskFaultFile(std::unique_ptr<File> base, std::shared_ptr<DiskFaultsCell> cell)
      : base_(std::move(base)), cell_(std::move(cell)) {}

  absl::Status PRead(void* buf, size_t len, uint64_t off) const override {
    return base_->PRead(buf, len, off);
  }
  absl::Status PReadV(const struct iovec* iov, int n, uint64_t off) const override {
    return base_->PReadV(iov, n, off);
  }
  absl::Status PWrite(const void* buf, size_t len, uint64_t off) override;
  absl::Status Sync() override;
  absl::StatusOr<uint64_t> Size() const override { return base_->Size(); }
  absl::Status Preallocate(uint64_t size) override { return base_->Preallocate(size); }
  bool IsBlockDevice() const override { return base_->IsBlockDevice(); }

 private:
  std::unique_ptr<File> base_;
  const std::shared_ptr<DiskFaultsCell> cell_;
};

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_DISK_FAULTS_H_
