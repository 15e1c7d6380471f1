#include "datanode/fault_fs.h"

#include <chrono>
#include <string>
#include <thread>

namespace ringcache::datanode {
namespace {

class SyncFaultFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  SyncFaultFile(std::unique_ptr<rocksdb::FSWritableFile> file, SyncFaultFileSystem* fs)
      : rocksdb::FSWritableFileOwnerWrapper(std::move(file)), fs_(fs) {}
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                           rocksdb::IODebugContext* dbg) override {
    if (fs_->full()) return rocksdb::IOStatus::NoSpace("injected: no space left on device");
    return rocksdb::FSWritableFileOwnerWrapper::Append(data, o, dbg);
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    if (fs_->full()) return rocksdb::IOStatus::NoSpace("injected: no space left on device");
    return rocksdb::FSWritableFileOwnerWrapper::Append(data, o, info, dbg);
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = Injected("fdatasync"); !s.ok()) return s;
    return rocksdb::FSWritableFileOwnerWrapper::Sync(o, dbg);
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = Injected("fsync"); !s.ok()) return s;
    return rocksdb::FSWritableFileOwnerWrapper::Fsync(o, dbg);
  }

 private:
  rocksdb::IOStatus Injected(const char* what) {
    if (const int ms = fs_->sync_delay_ms(); ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
    if (fs_->full()) return rocksdb::IOStatus::NoSpace("injected: no space left on device");
    if (fs_->TakeFailure()) {
      return rocksdb::IOStatus::IOError(std::string("injected ") + what + " failure");
    }
    return rocksdb::IOStatus::OK();
  }

  SyncFaultFileSystem* const fs_;
};

}  // namespace

bool SyncFaultFileSystem::TakeFailure() {
  int left = fail_syncs_.load();
  while (left > 0 && !fail_syncs_.compare_exchange_weak(left, left - 1)) {
  }
  return left > 0;
}

rocksdb::IOStatus SyncFaultFileSystem::Wrap(rocksdb::IOStatus s,
                                            std::unique_ptr<rocksdb::FSWritableFile>* result) {
  if (s.ok()) *result = std::make_unique<SyncFaultFile>(std::move(*result), this);
  return s;
}

rocksdb::IOStatus SyncFaultFileSystem::NewWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  return Wrap(target()->NewWritableFile(fname, options, result, dbg), result);
}

rocksdb::IOStatus SyncFaultFileSystem::ReopenWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  return Wrap(target()->ReopenWritableFile(fname, options, result, dbg), result);
}

rocksdb::IOStatus SyncFaultFileSystem::ReuseWritableFile(
    const std::string& fname, const std::string& old_fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  return Wrap(target()->ReuseWritableFile(fname, old_fname, options, result, dbg), result);
}

}  // namespace ringcache::datanode
