#include "datanode/meta_flusher.h"

namespace ringcache::datanode {

void MetaFlusher::Start(rocksdb::DB* db) {
  db_ = db;
  thread_ = std::thread([this] { Loop(); });
}

void MetaFlusher::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void MetaFlusher::OnFlushCompleted(rocksdb::DB* db, const rocksdb::FlushJobInfo& info) {
  if (info.cf_id == db->DefaultColumnFamily()->GetID()) return;
  absl::MutexLock l(&mu_);
  wanted_ = true;
}

void MetaFlusher::Loop() {
  absl::MutexLock l(&mu_);
  auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return wanted_ || stop_; };
  for (;;) {
    mu_.Await(absl::Condition(&woken));
    if (stop_) return;
    wanted_ = false;
    mu_.Unlock();
    rocksdb::FlushOptions fo;
    fo.wait = false;
    fo.allow_write_stall = true;
    db_->Flush(fo, db_->DefaultColumnFamily()).PermitUncheckedError();
    mu_.Lock();
  }
}

}  // namespace ringcache::datanode
