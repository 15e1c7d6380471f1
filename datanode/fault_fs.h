// SyncFaultFileSystem: the data node store's file-I/O seam for fault tests (the RocksDB
// counterpart of common/file.h's FaultInjectionFile). It wraps a RocksDB FileSystem and, on the
// files RocksDB writes (the WAL included), makes the next N syncs fail with an I/O error (a
// failed fdatasync), delays every sync (a slow disk), or refuses every append and sync with
// ENOSPC (a full disk); everything else goes to the wrapped file system.
// common/disk_faults.h drives the last two from a file for fault tests of real processes
// (`ringcache-datanode --disk-faults-file`).
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_DATANODE_FAULT_FS_H_
#define RINGCACHE_DATANODE_FAULT_FS_H_

#include <rocksdb/file_system.h>

#include <atomic>
#include <memory>
#include <string>

namespace ringcache::datanode {

class SyncFaultFileSystem : public rocksdb::FileSystemWrapper {
 public:
  explicit SyncFaultFileSystem(const std::shared_ptr<rocksdb::FileSystem>& base)
      : rocksdb::FileSystemWrapper(base) {}
  const char* Name() const override { return "RingcacheSyncFaultFileSystem"; }

  // The next `n` Sync/Fsync calls fail with an I/O error.
  void FailNextSyncs(int n) { fail_syncs_.store(n); }
  // Every Sync/Fsync waits this long first (0: none).
  void SetSyncDelayMs(int ms) { sync_delay_ms_.store(ms); }
  int sync_delay_ms() const { return sync_delay_ms_.load(); }
  // While set, every Append and Sync fails with ENOSPC.
  void SetFull(bool full) { full_.store(full); }
  bool full() const { return full_.load(); }
  // Returns true (and counts one down) if this sync must fail.
  bool TakeFailure();

  rocksdb::IOStatus NewWritableFile(const std::string& fname,
                                    const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& fname,
                                       const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& fname, const std::string& old_fname,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSWritableFile>* result,
                                      rocksdb::IODebugContext* dbg) override;

 private:
  rocksdb::IOStatus Wrap(rocksdb::IOStatus s, std::unique_ptr<rocksdb::FSWritableFile>* result);
  std::atomic<int> fail_syncs_{0};
  std::atomic<int> sync_delay_ms_{0};
  std::atomic<bool> full_{false};
};

}  // namespace ringcache::datanode

#endif  // RINGCACHE_DATANODE_FAULT_FS_H_
