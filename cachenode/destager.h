// Destager: the cache node's background write-back — destage of dirty blocks (idle, forced, and
// before eviction), the reclaimer that frees evicted blocks and demotes RAM blocks to SSD,
// relogging of dirty blocks whose log copies sat on a lost data node, and flush. It works on the
// BlockMap and the storage below it and never calls the CacheNode above it; when to destage is
// the pure DestagePlanner's decision.
//
// Every background write home asks the ownership gate first (`check_owner`): a fenced node
// neither destages nor logs again (docs/durability.md, "The fencing protocol"). Flush is not
// gated: the gateway settles a fenced node through it.
//
// Thread-safety: thread-safe. Start() runs two threads (reclaimer, destager); their bodies are
// ReclaimStep() and DestageTick(), which tests may drive by hand instead.
#ifndef RINGCACHE_CACHENODE_DESTAGER_H_
#define RINGCACHE_CACHENODE_DESTAGER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "cachenode/block_map.h"
#include "datanode/client/datanode_pool.h"
#include "cachenode/destage_planner.h"
#include "cachenode/ownership.h"
#include "cachenode/slot_repair.h"
#include "cachenode/slot_store.h"
#include "cachenode/stripes.h"
#include "cachenode/vdi_table.h"
#include "cachenode/write_log.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "ring/ring.h"

namespace ringcache::cachenode {

struct DestagerOptions {
  uint32_t node_id = 1;
  uint32_t block_size = 4096;
  uint32_t destage_max_blocks = 256;  // largest coalesced destage write (blocks)
  // Runs (of any objects) a destage batch writes home together: one request and one commit per
  // data node (node-api 3), instead of one per run and home.
  size_t destage_batch_runs = 16;
  int64_t relog_after_ms = 30000;     // a data node unreachable this long is taken for lost
  DestagePlannerOptions planner;
};

// What the destager works on; nothing is owned, everything outlives the destager.
struct DestagerContext {
  BlockMap* map = nullptr;
  VdiTable* vdis = nullptr;
  SlotStore* slots = nullptr;
  SlotRepair* repair = nullptr;
  WriteLog* log = nullptr;
  datanode::DataNodePool* pool = nullptr;
  ObjectStripes* stripes = nullptr;
  Ownership* owner = nullptr;  // the epoch of blocks written home without a log record
  Clock* clock = nullptr;
  // OK while this node may act as the owner of its objects (CacheNode::CheckOwner).
  std::function<absl::Status()> check_owner;
};

class Destager {
 public:
  Destager(const DestagerOptions& options, const DestagerContext& context,
           metrics::Registry* registry);
  ~Destager();  // Stop()

  void Start();
  // Stops the threads (dirty blocks stay on SSD). Idempotent.
  void Stop();

  // Holds a write of a write-back VDI back before the dirty cap (destage_planner.h): sleeps the
  // planner's delay, or at the cap waits (at most 1 s, never past `deadline`) for destage to
  // bring the node under it. Returns the time held. Any thread; no lock held.
  // The same for `v` alone at the per-VDI cap: its writers wait while destage takes its blocks
  // first.
  absl::Duration ThrottleWrite(const VdiInfo& v, absl::Time deadline);

  // The SSD tier's slots changed (an online resize): the watermarks and caps follow.
  void SetSlots(uint64_t slots) { planner_.set_slots(slots); }

  // Counts foreground block operations (idle detection).
  void NoteForeground(uint64_t blocks) { fg_blocks_.fetch_add(blocks, std::memory_order_relaxed); }

  // Writes the dirty blocks of one object around `key` home (coalescing adjacent dirty blocks;
  // `single`: only `key`) and marks them clean. A block a data node refuses as older than its
  // copy (fencing token) is obsolete: it is discarded, not retried.
  // REQUIRES: the object's stripe lock is held.
  absl::Status DestageAround(const VdiInfo& v, const BlockKey& key, uint64_t* blocks_done,
                             bool single = false);
  // Destages every block of `vdi` (0: all) dirty when it is called — only of objects
  // `moving_under` does not give to this node, if set — and waits until done; blocks written
  // meanwhile may stay dirty. REQUIRES: no stripe lock held.
  absl::Status Flush(uint32_t vdi, const ring::Ring* moving_under);

  // Logs again the dirty blocks whose log record has one of `seqs` (a scrub found a copy
  // damaged); returns how many. REQUIRES: no stripe lock held.
  absl::StatusOr<uint32_t> RelogRecords(const absl::flat_hash_set<uint64_t>& seqs);

  // One round of the reclaimer: handles one work item, waiting up to `wait` for one.
  void ReclaimStep(absl::Duration wait);
  // One round of the destager: asks the planner, relogs, destages a batch.
  void DestageTick();

  // Test-only: runs `hook` in every destage after it chose its blocks and their slots, before
  // it reads them (a window for racing a DropBlocks).
  void SetPlannedHookForTest(std::function<void()> hook);

 private:
  absl::Status ProcessWork(const ReclaimWork& w);
  // Writes a RAM block the placement moved out to a fresh slot. With no slot free, an exclusive
  // node relieves slot pressure and tries once more (`retried`); then the clean block leaves.
  absl::Status Demote(const BlockKey& key, bool retried);
  // Destages the batch the planner asked for (idle: stop when load returns; else paced).
  // `only_vdi` (not 0): that VDI's blocks only (it is at its per-VDI cap).
  void DestageBatch(const DestagePlanner::Decision& d, uint64_t fg_at_tick, uint32_t only_vdi = 0);
  // A run planned, read and stamped, to be written home (PrepareRun) and settled (SettleRun).
  struct PreparedRun {
    VdiInfo v;
    BlockKey key;  // the dirty block the run was planned around
    uint64_t object = 0;
    uint64_t base = 0;  // the object's first block
    DestageRun run;
    std::string data;
    datanode::HomeStamp stamp;
    uint32_t unlogged = 0;  // blocks without a log record: fresh sequences reserved for them
    uint64_t fresh = 0;     // the first of them
    std::vector<BlockKey> riders;  // other seeds of the batch inside the run
  };
  // Plans the run around `key` (`single`: only `key`), reads it and stamps it; false: nothing
  // dirty there. REQUIRES: the object's stripe lock is held.
  absl::StatusOr<bool> PrepareRun(const VdiInfo& v, const BlockKey& key, bool single,
                                  PreparedRun* p);
  // After the run's write home answered `written`: marks it clean, or discards what a home
  // holds newer, or counts the error (returned). REQUIRES: the object's stripe lock is held.
  absl::Status SettleRun(const PreparedRun& p, const absl::Status& written,
                         uint64_t* blocks_done);
  // Destages the runs around `seeds` (each with its VDI) under their stripes, together (one
  // DataNodePool::WriteAllBatch). Returns the first failure; `requeue`: the seeds came from the
  // destage queue (NextDirty), and a failed run's go back to it. REQUIRES: no stripe lock held.
  absl::Status DestageSeeds(const std::vector<std::pair<BlockKey, VdiInfo>>& seeds,
                            uint64_t* blocks_done, bool requeue);
  // Reads the blocks of `run` into `data` (repairing damaged dirty slots).
  absl::Status ReadRun(const BlockKey& key, uint64_t object, uint64_t base,
                       const DestageRun& run, std::string* data);
  // A data node refused block `key` as older than its copy: drop it.
  absl::Status DiscardObsolete(const BlockKey& key, const absl::Status& refusal);
  void RelogFromLostDataNodes();
  // Appends a new record of one dirty block and retires its old one. REQUIRES: stripe held.
  absl::Status RelogBlock(const VdiInfo& v, const BlockKey& key);

  const DestagerOptions options_;
  const DestagerContext ctx_;
  std::atomic<uint64_t> fg_blocks_{0};
  // A VDI whose writers wait at the per-VDI cap (0: none): destaged first, unpaced.
  std::atomic<uint32_t> vdi_at_cap_{0};
  std::atomic<bool> stop_{false};
  // Tick and PauseMicros on the destager thread only; the const write delay from any thread.
  DestagePlanner planner_;
  std::vector<ReclaimWork> retry_;             // reclaimer thread only
  absl::flat_hash_set<uint32_t> relogged_;     // lost data nodes already handled (destager only)
  // Per data node, the store changes (DataNodePool::StoreChanges) already relogged for.
  absl::flat_hash_map<uint32_t, uint64_t> store_changes_seen_;  // destager only
  // Data nodes out of the data ring whose log copies were made again elsewhere.
  absl::flat_hash_set<uint32_t> relogged_out_;  // destager only
  int64_t last_relog_check_us_ = 0;            // destager only
  absl::Mutex hook_mu_;
  std::function<void()> planned_hook_ ABSL_GUARDED_BY(hook_mu_);
  std::thread reclaimer_;
  std::thread destager_;
  metrics::Counter* destage_bytes_;
  metrics::Counter* destage_errors_;
  metrics::Counter* obsolete_discarded_;
  metrics::Counter* write_throttle_seconds_;
  metrics::Counter* write_throttled_;
};

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_DESTAGER_H_
