// The store's meta family flushed after the others (BlockStore::Open, datanode/store.cc).
#ifndef RINGCACHE_DATANODE_META_FLUSHER_H_
#define RINGCACHE_DATANODE_META_FLUSHER_H_

#include <rocksdb/db.h>
#include <rocksdb/listener.h>

#include <thread>

#include "absl/synchronization/mutex.h"

namespace ringcache::datanode {

// After a flush of the blocks or log family, flushes the meta (default) family, so that its few
// unflushed records never keep alive a WAL file the others are done with (BlockStore::Open). Not
// from the callback itself: that runs on the flush thread, and a writer held by a write stall waits
// for that very flush while Flush waits for the writer (a deadlock). A thread of its own does.
class MetaFlusher : public rocksdb::EventListener {
 public:
  ~MetaFlusher() override { Stop(); }
  // Starts the thread once `db` is open (the listener is registered before).
  void Start(rocksdb::DB* db);
  // Ends the thread; before the DB closes.
  void Stop();
  void OnFlushCompleted(rocksdb::DB* db, const rocksdb::FlushJobInfo& info) override;

 private:
  void Loop();

  rocksdb::DB* db_ = nullptr;
  std::thread thread_;
  absl::Mutex mu_;
  bool wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringcache::datanode

#endif  // RINGCACHE_DATANODE_META_FLUSHER_H_
