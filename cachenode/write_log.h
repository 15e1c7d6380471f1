// WriteLog: a cache node's write-back log on the data nodes (docs/design.md §4, paper 002
// §III-E..G).
//
// Every write-back write also goes, as one record per block (cache node id, sequence, block key,
// data, checksum), to N-1 data nodes picked on the data ring outside the object's N homes
// (datanode::DataNodePool::LogAppend: the nodes after its homes on the data ring); the client is
// acknowledged only once the cache copy and all
// N-1 log copies are durable. The same sequence counter stamps every write the node sends home
// (destage, write-through, write-around, trim), so log replay (cachenode/log_replay.h) can tell a
// record that is older than the home copy from a newer one.
//
// Sequences never repeat, even across kill -9: a durable high-water mark in a small file beside
// the SSD slot file is moved forward a million sequences at a time, before any of them is used.
//
// Reclaim: a record is garbage once a newer record of its block is durable, or once its block
// reached all its homes (destage). Garbage is dropped in the background, in batches sent to every
// data node. A record that could not be dropped (a data node was down, or the cache node crashed
// with a batch pending) is found again by the collector, which scans a data node's records of
// this cache node and drops those no block needs (`live` callback); it runs once per data node
// after start and again for any data node that missed a batch. Leftover records cost space only:
// replay never lets an older record overwrite a newer home copy.
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_CACHENODE_WRITE_LOG_H_
#define RINGCACHE_CACHENODE_WRITE_LOG_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "datanode/client/datanode_pool.h"
#include "common/metrics.h"

namespace ringcache::cachenode {

struct WriteLogConfig {
  uint32_t node_id = 0;
  std::string seq_path;              // high-water mark file (created if missing)
  int reclaim_interval_ms = 200;     // batch period of background reclaim
  // Sequences start at least here (a new incarnation: above every sequence the data nodes
  // took from this node id), whatever the high-water mark file says.
  uint64_t min_seq = 0;
};

class WriteLog {
 public:
  // Returns the sequences the collector must keep: every sequence that is the current record of
  // a dirty block. Called without the log's locks held.
  using LiveFn = std::function<absl::flat_hash_set<uint64_t>()>;

  // Opens the high-water mark and starts the reclaim thread. `pool` and `registry` are not owned.
  static absl::StatusOr<std::unique_ptr<WriteLog>> Open(const WriteLogConfig& config,
                                                        datanode::DataNodePool* pool,
                                                        metrics::Registry* registry, LiveFn live);
  ~WriteLog();

  // Takes `n` consecutive fresh sequences and returns the first. The range counts as in flight
  // (the collector leaves it alone) until Done(first).
  absl::StatusOr<uint64_t> Reserve(uint32_t n);
  void Done(uint64_t first);

  // Appends one record per block of `data` (count × block_size bytes, blocks first..) with
  // sequences first_seq.. and the ownership epoch the write was accepted at (replay stamps the
  // home writes with it: fencing tokens), on replication-1 data nodes. OK means durable on all
  // of them. `overlap` (may be empty) runs on the calling thread while the appends are in flight.
  // *landed (may be null) receives the data nodes that hold the records: relogging after a data
  // node loss asks where records are, not where today's ring would put them.
  absl::Status Append(uint32_t vdi, uint64_t object, uint32_t first_block, uint32_t block_size,
                      const char* data, uint32_t count, int replication, uint64_t first_seq,
                      uint64_t epoch, const std::function<void()>& overlap = nullptr,
                      std::vector<uint32_t>* landed = nullptr);
  // Queues records that are no longer needed for background reclaim.
  void Retire(const std::vector<uint64_t>& seqs);
  void Retire(uint64_t seq) { Retire(std::vector<uint64_t>{seq}); }
  // Reads record `seq` back (to repair a damaged SSD slot of a dirty block).
  absl::StatusOr<v1::LogRecord> Fetch(uint64_t seq);
  // Drops every retired record now (flush, shutdown, tests). Returns kUnavailable if some data
  // node could not be reached (the collector will drop its copies later).
  absl::Status ReclaimNow();

  // True while some data node reported its log area over its limit (pushback: destage).
  bool over_limit() const { return over_limit_.load(); }
  uint32_t node_id() const { return config_.node_id; }
  uint64_t pending_reclaims() const;
  // True once the collector has visited every data node since start.
  bool collected() const { return collected_.load(); }

 private:
  WriteLog(const WriteLogConfig& config, datanode::DataNodePool* pool, LiveFn live);
  absl::Status LoadMark();
  absl::Status StoreMark(uint64_t mark) ABSL_EXCLUSIVE_LOCKS_REQUIRED(seq_mu_);
  void Loop();
  // Drops the records of this node on data node `id` that are below the in-flight bound and not
  // live. Returns how many were dropped.
  absl::StatusOr<uint64_t> Collect(uint32_t id);

  const WriteLogConfig config_;
  datanode::DataNodePool* const pool_;
  const LiveFn live_;

  absl::Mutex seq_mu_;
  uint64_t next_ ABSL_GUARDED_BY(seq_mu_) = 1;
  uint64_t mark_ ABSL_GUARDED_BY(seq_mu_) = 0;     // durable: no sequence >= mark_ was handed out
  std::multiset<uint64_t> inflight_ ABSL_GUARDED_BY(seq_mu_);

  mutable absl::Mutex mu_;
  std::vector<uint64_t> retired_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint32_t> collect_ ABSL_GUARDED_BY(mu_);  // data nodes to collect
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> over_limit_{false};
  std::atomic<bool> collected_{false};
  std::thread thread_;

  metrics::Counter* appended_ = nullptr;
  metrics::Counter* overlapping_ = nullptr;
  metrics::Counter* append_failures_ = nullptr;
  metrics::Counter* reclaimed_ = nullptr;
  metrics::Counter* collected_records_ = nullptr;
};

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_WRITE_LOG_H_
