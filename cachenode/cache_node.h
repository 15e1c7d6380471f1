// CacheNode: one SSD cache node's front — what the gateway's router calls, in-process
// (ringcache-local) or over gRPC (ringcache-gateway via cachenode/service.h). It serves byte
// ranges inside objects: reads, writes, trims in the VDI's cache mode, under per-object stripes,
// after the ownership check. Below it (cachenode/README.md has the picture):
//   BlockWriter (block_writer.h) write-back / write-through / write-around of whole blocks
//   BlockMap (block_map.h)   entries, the one dirty truth, the policy and placement; plans, no I/O
//   Destager (destager.h)    destage, reclaim, relog, flush; asks the pure DestagePlanner when
//   VdiTable (vdi_table.h)   geometry and mode of each VDI, and its state file
//   SlotStore, WriteLog, datanode::DataNodePool: the SSD, the write-back log, the data nodes.
//
// Locking (in order; never acquire an earlier lock while holding a later one):
//   1. object stripes (stripes.h): serialise every operation on one object — foreground reads,
//      writes and trims, and destage, reclaim and relog of its blocks — so a block's slot is
//      never released or rewritten while another thread reads it.
//   2. the BlockMap's lock, then the VdiTable's: in-memory work only.
// The slot store, write log and data node pool have their own internal locks and are called
// with no BlockMap lock held.
//
// Invariants:
//  1. A dirty block is durable on the SSD slot store before the write that dirtied it returns;
//     a dirty block in RAM also keeps its SSD slot (RAM is not durable).
//  2. A block the policy evicted stays in the map (state kEvicting) and keeps serving reads until
//     the reclaimer has destaged it (if dirty) and released its storage; only then may a read
//     miss go to the data nodes, so no read returns stale data.
//  3. A dirty cached block is the authoritative copy; data nodes see it only through destage.
//  4. A dirty block's data is also in its write-back log record (BlockEntry::log_seq) on N-1
//     data nodes before the write that dirtied it returns (cachenode/write_log.h). Its record is
//     retired only after a newer record of the block is durable or the block reached all N
//     homes. Every write sent home carries a version stamp from the log's sequence counter.
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_CACHENODE_CACHE_NODE_H_
#define RINGCACHE_CACHENODE_CACHE_NODE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cachenode/block_map.h"
#include "cachenode/block_writer.h"
#include "datanode/client/datanode_pool.h"
#include "cachenode/destager.h"
#include "cachenode/ownership.h"
#include "cachenode/policy/registry.h"
#include "cachenode/slot_repair.h"
#include "cachenode/slot_store.h"
#include "cachenode/stripes.h"
#include "cachenode/vdi_table.h"
#include "cachenode/write_log.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "ring/ring.h"
#include "ringcache/v1/cachenode.pb.h"
#include "ringcache/v1/common.pb.h"

namespace ringcache::cachenode {

struct CacheNodeConfig {
  uint32_t node_id = 1;
  std::string cluster_id;               // the cluster file's; stamped into the SSD store
  std::string ssd_path;                 // slot file (or block device)
  // Where the node's small state files go (<state_dir>/cache.owner, .vdis, .logseq,
  // .datanodes). Empty: beside a slot *file* (<ssd_path>.owner, ...); a block device needs one,
  // so nothing is ever created beside a device node.
  std::string state_dir;
  uint64_t ssd_bytes = 1ull << 30;      // SSD tier capacity
  uint64_t ram_bytes = 64ull << 20;     // RAM tier capacity (exclusive of the SSD tier)
  uint32_t block_size = 4096;           // cache block, 4..64 KiB
  std::string policy = policy::kDefaultPolicy;  // membership policy (policy/registry.h)
  // RAM/SSD placement: uarc | lru, with NAME(exclusive) and/or NAME(sieve=N) (placement.h)
  std::string placement = "uarc";
  // Reads at least this large are streams: their SSD hits stay on SSD and do not reorder the
  // RAM tier (a bcache-style sequential cutoff for RAM; 0 = off).
  uint64_t stream_read_bytes = 128 << 10;
  double slot_reserve = 0.02;           // fraction of slots kept free for in-flight evictions
  // Destage (docs/design.md §4): idle when fewer than idle_ops_per_s foreground block ops per
  // second were seen over idle_window_ms; forced above dirty_high_watermark (fraction of SSD slots)
  // at up to forced_destage_mb_s.
  double idle_ops_per_s = 100;
  int64_t idle_window_ms = 500;
  double dirty_high_watermark = 0.6;
  double dirty_low_watermark = 0.4;
  double forced_destage_mb_s = 64;
  double forced_destage_duty = 0.25;    // forced destage's share of wall time, (0, 1]
  // Aging destage keeps the age of the oldest dirty block near this under load (0: off;
  // destage_planner.h).
  int64_t dirty_age_target_ms = 30000;
  // Dirty share of the SSD slots writers are held under: writes of write-back VDIs slow down
  // smoothly from the high watermark to it, and wait (at most 1 s each) at it. 0: 0.9, or
  // halfway from the high watermark to 1 when that is higher.
  double dirty_cap = 0;
  // The effective cap (dirty_cap, or its default for 0).
  double DirtyCap() const;
  // Share of the SSD slots one VDI may hold dirty (0: none): its writers wait (at most 1 s a
  // write) while destage takes its blocks first (destage_planner.h).
  double vdi_dirty_cap = 0;
  uint32_t destage_max_blocks = 256;    // largest coalesced destage write (blocks)
  uint32_t destage_batch_runs = 16;     // runs a destage batch writes home together (1..64)
  // SSD write budget (policy/write_budget.h): the bytes a day the SSD is rated for (0: none).
  // With one, misses go around the cache (reads unfilled, writes write-around) while the node
  // writes faster than that, from half of a bucket of ssd_budget_burst_s of the rate on.
  double ssd_budget_bytes_per_day = 0;
  double ssd_budget_burst_s = 3600;
  // The rating's life (a drive rated 1 DWPD for 5 years): with the bytes written so far (kept in
  // <state>.wear), what is left of budget x 365 x years, at the current write rate, is the life
  // left that status and metrics show.
  double ssd_rated_years = 5;
  // A data node unreachable this long is taken for lost: the dirty blocks whose log copies may
  // sit on it are logged again on the remaining nodes (docs/design.md §7).
  int64_t relog_after_ms = 30000;
  // A new incarnation (a new or wiped SSD, a lost sequence mark) asks every data node for the
  // node's sequence high-water mark and replays the old incarnation's log before it serves; it
  // waits this long for the data nodes to answer, then fails the start.
  int64_t incarnation_wait_ms = 120000;
  // Test seam: opens the SSD file (null: the POSIX file at ssd_path). Fault tests inject a
  // common/file.h FaultInjectionFile here.
  std::function<absl::StatusOr<std::unique_ptr<File>>(const std::string& path)> open_ssd_file;
  absl::Status Validate() const;
  // The path the state files are named after: "<state_dir>/cache", or ssd_path.
  std::string StateBase() const { return state_dir.empty() ? ssd_path : state_dir + "/cache"; }
};

class CacheNode {
 public:
  // Opens the slot store (recovering its blocks), builds the policy, starts the reclaimer and
  // destager threads. `pool`, `clock` and `registry` are not owned and must outlive the node.
  static absl::StatusOr<std::unique_ptr<CacheNode>> Create(const CacheNodeConfig& config,
                                                           datanode::DataNodePool* pool, Clock* clock,
                                                           metrics::Registry* registry);
  ~CacheNode();  // stops the threads (dirty blocks stay on SSD)

  // Registers (or updates) a VDI; blocks of unknown VDIs are refused with kInvalidArgument.
  absl::Status RegisterVdi(const v1::VdiGeometry& vdi);
  // Destages and drops every cached block of the VDI, then forgets it.
  absl::Status DropVdi(uint32_t vdi_id);

  // Whether a read of the range would be served from this node's RAM and SSD alone (no data
  // node). A hint: the answer may change before the read runs. False for an unknown VDI or a
  // range beyond the object.
  bool IsStored(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len);
  // The errors Read would answer for the range without reading (unknown VDI, beyond the
  // object): lets a server refuse a request before it sets a buffer aside for the answer.
  absl::Status CheckRange(uint32_t vdi, uint32_t offset, uint32_t len);
  // Byte ranges inside one object. REQUIRES: offset + len <= object size.
  absl::Status Read(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len, char* out);
  // `deadline` (wall time; the caller's RPC deadline less a margin): a write that cannot start
  // before it (no free SSD slot yet) fails with kDeadlineExceeded without touching anything, so
  // a request the client already gave up on never lands later over a newer write.
  absl::Status Write(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                     const char* data, absl::Time deadline = absl::InfiniteFuture());
  // Discards the range (zero = WRITE_ZEROES semantics: it must read back as zeros).
  absl::Status Trim(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len, bool zero);
  // Loads the range into the cache (NBD_CMD_CACHE).
  absl::Status Prefetch(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len);
  // Fills *allocated with one flag per block of the range: written (cached or on a data node).
  absl::Status Allocation(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                          std::vector<bool>* allocated);

  // Switches a VDI's cache mode; leaving writeback destages its dirty blocks first.
  absl::Status SetMode(uint32_t vdi, CacheMode mode);
  absl::StatusOr<CacheMode> GetMode(uint32_t vdi) const;
  // Switches a VDI's cache policy live (policy/registry.h SetVdiPolicy: order, admission,
  // bypasses and victim of its queue); "" or "default" returns it to the node's policy. Its
  // cached blocks stay, dirty ones too. Kept across restarts. kInvalidArgument for a spec that
  // cannot run per VDI, kFailedPrecondition if the node policy has no per-VDI queues.
  absl::Status SetPolicy(uint32_t vdi, const std::string& spec);
  // The policy the VDI runs under (its own spec or the node's).
  std::string PolicyOf(uint32_t vdi) const;
  // Destages every dirty block (of one VDI, or all when vdi == 0) and waits until done.
  absl::Status Flush(uint32_t vdi);
  // Destages the dirty blocks of the objects that `ring` does not give to this node (a cache
  // node joining takes them over: gateway/router.h AddCacheNode); the others stay dirty.
  absl::Status FlushMoving(const ring::Ring& ring);

  // Online resize of the SSD and RAM tiers (docs/cache-node.md, "Resizing the tiers") to
  // `ssd_bytes` and `ram_bytes` (whole blocks; 0 leaves a tier as it is). Growing takes effect
  // at once: the slot file grows and the policy is rebuilt for the new capacity, keeping every
  // block in its eviction order. Shrinking the SSD stops using the slots past the new size at
  // once (persisted: a restart resumes it), evicts their blocks (dirty ones are destaged first,
  // never dropped) and cuts the file once they are all gone, in the background; resize_state()
  // tells how far it is. Shrinking the RAM demotes its least valuable blocks to the SSD (an
  // exclusive tier's policy first gives up what no longer fits). The RAM size is recorded in
  // <state>.ram and kept by a restart whose configuration was not edited since. kInvalidArgument
  // for a size too small; kFailedPrecondition for a block device too small, a store grown too
  // many times, or a RAM size for a node that runs without a RAM tier.
  absl::Status Resize(uint64_t ssd_bytes, uint64_t ram_bytes);
  // Where the tiers' sizes stand (proto/ringcache/v1/cachenode.proto ResizeTiersResponse): the
  // SSD size it serves with, the file's slots, a pending shrink's target and the blocks still
  // past it, the RAM tier's size and the blocks it holds.
  v1::ResizeTiersResponse resize_state() const;

  // Fills per-VDI statistics (all VDIs when vdi == 0).
  void Stats(uint32_t vdi, std::vector<v1::VdiCacheStats>* out) const;
  uint64_t dirty_blocks() const;
  uint64_t cached_blocks() const;
  uint32_t block_size() const { return config_.block_size; }
  const RecoveryStats& recovery() const { return recovery_; }
  // The SSD store's incarnation (SlotStore::incarnation).
  const std::string& incarnation() const { return slots_->incarnation(); }
  WriteLog* write_log() const { return log_.get(); }
  // Test-only: runs `hook` in every destage after it chose its blocks and their slots, before
  // it reads them (a window for racing a DropBlocks).
  void SetDestagePlannedHookForTest(std::function<void()> hook);
  // Returns the block the destager would take next (and puts it back), or nullopt.
  std::optional<SlotKey> NextDestageForTest();

  // Cluster mode. Sets the gate the destager asks before each background batch and block: while
  // it returns false (the node is fenced: its etcd lease may have expired, so its objects may
  // already belong to another node) nothing is destaged in the background, and no dirty block is
  // logged again for a lost data node (relog_after_ms). Flush() is not gated:
  // the gateway calls it only while it holds the node's requests. May be empty (no gate).
  // The gate is also asked once more when a write or trim has its stripe, right before it
  // writes anything (SSD, log, homes): a request that passed the service's fence check but
  // waited (for slots, a stripe) until the lease ran out is refused ("fenced:"), so the gateway
  // can re-send requests in flight to a node whose lease expired without them landing later.
  void SetDestageGate(std::function<bool()> gate);
  struct DropResult {
    uint64_t dropped = 0;     // blocks dropped
    uint64_t dirty_kept = 0;  // dirty blocks kept (only when !drop_dirty)
  };
  // Drops cached blocks WITHOUT destaging them (a membership change). With `ring` null every
  // block is dropped; otherwise only those of objects that `ring` does not assign to this node
  // (and of VDIs this node does not know). Dirty blocks are dropped only if `drop_dirty`.
  // REQUIRES: dirty blocks dropped were settled elsewhere (destaged, or the log replayed), and no
  // request for the dropped objects is being served (the gateway holds them).
  absl::StatusOr<DropResult> DropBlocks(bool drop_dirty, const ring::Ring* ring);
  // Drops the clean cached blocks of VDI `vdi` (`ringcachectl vdi invalidate`), while it is
  // served: each block is checked under its object's stripe lock, so a block a write made dirty
  // meanwhile is kept (and counted), never dropped. kFailedPrecondition for a VDI the node does
  // not know (as for every block request).
  absl::StatusOr<DropResult> InvalidateVdi(uint32_t vdi);
  // The node as a whole, for the gateway's node list.
  struct Usage {
    uint64_t ssd_bytes = 0;       // the slots' capacity
    uint64_t ssd_used_bytes = 0;  // slots holding a block
    uint64_t dirty_bytes = 0;
    uint64_t hits = 0;            // RAM and SSD hits, every VDI, since the node started
    uint64_t misses = 0;
  };
  Usage usage() const;
  // SSD wear and the write budget (config ssd_budget_*; docs/cache-node.md "SSD write budget").
  struct Wear {
    uint64_t written_bytes = 0;       // to the SSD's slots since wear records began (<state>.wear)
    double budget_bytes_per_day = 0;  // 0: no budget
    std::string state;                // open | tight | closed ("" without a budget)
    double fill = 1;                  // the budget's bucket, 1 full, <= 0 spent
    double rate_bytes_per_s = 0;      // SSD writes, averaged over about an hour
    uint64_t around = 0;              // misses the budget sent around the cache
    double life_days = -1;            // life left of the rating at this rate (-1: unknown)
  };
  Wear wear() const;
  // Gives the VDI the share of the cache its geometry asks for (ssd_min/max_permille).
  absl::Status ApplyShare(const v1::VdiGeometry& vdi);
  v1::SsdWear WearProto() const;
  // Keeps the bytes written so far in <state>.wear: at most once a minute unless `force` (the
  // service calls it on every health probe, the destructor with force).
  void SaveWear(bool force);
  // Ownership (cachenode/ownership.h, docs/durability.md). OK, or kFenced naming why this node
  // must not act as owner now: its SSD failed a write or fdatasync (sticky), it is quarantined
  // (persisted), or its gate (the etcd lease, SetDestageGate) is closed. Asked by the service
  // for every block request and by every background path (destage, reclaim, relog).
  absl::Status CheckOwner();
  // Raises the cache ring epoch that new writes are stamped with (fencing tokens): every block
  // request carries the epoch its sender routed with. Persisted when it grows.
  void ObserveEpoch(uint64_t epoch);
  uint64_t epoch() const { return owner_->epoch(); }
  Ownership* ownership() const { return owner_.get(); }
  // Lifts a quarantine at `epoch` (after DropBlocks(true, nullptr): the gateway settled this
  // node's dirty blocks and took it back).
  absl::Status Readmit(uint64_t epoch);
  // OK, or the SSD's sticky kDeviceFailed error.
  absl::Status device_status() const { return slots_->failed(); }
  // Uses `ring` for the data nodes from now on (rebalancing; returns once no request uses the
  // previous one) and keeps it in <ssd_path>.datanodes for the next start.
  absl::Status SetDataRing(const datanode::DataRing& ring);
  // A scrub found log records `seqs` of this node damaged on a data node: logs their dirty
  // blocks again (Destager::RelogRecords). Returns how many blocks were logged again.
  absl::StatusOr<uint32_t> RelogRecords(const absl::flat_hash_set<uint64_t>& seqs);
  // Where SetDataRing keeps the ring of a node whose SSD file is `ssd_path`.
  // The data ring saved at run time; `state_base` is CacheNodeConfig::StateBase().
  static std::string DataRingPath(const std::string& state_base) {
    return state_base + ".datanodes";
  }
  uint64_t data_ring_epoch() const { return pool_->ring().epoch; }

 private:
  class PoolLoad;

  CacheNode(const CacheNodeConfig& config, datanode::DataNodePool* pool, Clock* clock,
            metrics::Registry* registry);
  absl::Status Init();
  // A new incarnation of the node's store (docs/durability.md, "Incarnations"): when the SSD
  // store was just created (`new_store`), the old incarnation's log records are replayed home
  // and dropped; either way, returns the first sequence the new incarnation may use: above
  // every sequence the data nodes ever took from this node id.
  absl::StatusOr<uint64_t> AdoptIncarnation(bool new_store);
  // A store that is not new must be the node's current one: refused when a data node records
  // another incarnation as current (an old SSD put back after a newer one took over: its blocks
  // are stale). Records this one where none is recorded. Best effort: data nodes that do not
  // answer are not waited for.
  absl::Status CheckStoreIsCurrent();
  // Warm restart: recovered slots enter the block map; damaged dirty ones are rewritten from
  // their log records first.
  void AdoptRecovered(std::vector<RecoveredSlot> recovered);
  void AddNodeGauges();
  // The VBQ gauges of a VDI seen for the first time.
  void AddVdiGauges(const v1::VdiGeometry& vdi);
  // The VDI's ringcache_vdi_policy_info series, for `policy` (replacing the one for `old`).
  void SetPolicyGauge(const v1::VdiGeometry& vdi, const std::string& old,
                      const std::string& policy);

  // Reads `count` blocks from `first`. REQUIRES: the object's stripe lock is held.
  absl::Status ReadBlocks(const VdiInfo& v, uint64_t object, uint32_t first, uint32_t count,
                          char* out);
  // The read's cached blocks into `buf`; a damaged clean one becomes a miss.
  absl::Status ServeCached(const VdiInfo& v, uint64_t object, uint32_t first,
                           std::vector<ReadPlan>* plan, char* buf);
  // The read's misses, fetched as runs from the least-loaded home replica.
  absl::Status FetchMisses(const VdiInfo& v, uint64_t object, uint32_t first,
                           const std::vector<ReadPlan>& plan, char* buf);
  // Fills admitted misses and promotions (never waits for a slot: a stripe is held).
  void FillAndPromote(const VdiInfo& v, uint64_t object, uint32_t first,
                      const std::vector<ReadPlan>& plan, const char* buf);

  // Writes one chunk (taking its slots first, then its stripe). REQUIRES: no stripe held.
  absl::Status WriteChunk(const VdiInfo& v, uint64_t object, uint32_t cb, uint32_t count,
                          uint64_t cstart, uint64_t cend, const char* src, absl::Time deadline);
  // Forgets a cached block under its object stripe (callers that hold no stripe: a concurrent
  // destage must never read a slot this releases and another write reuses).
  absl::Status InvalidateUnderStripe(const BlockKey& key);
  // The slots kept free for evictions in flight, for a tier of `slots`.
  uint32_t ReserveFor(uint32_t slots) const;
  // The RAM tier's size at start: the configured one, or the one an online resize recorded.
  uint64_t RamBytesAtStart() const;
  // The node's policy for `ctx`, with the VDIs' own policies and shares set (a resize).
  absl::StatusOr<std::unique_ptr<policy::CachePolicy>> BuildPolicyFor(
      const policy::PolicyContext& ctx) const;
  // While a shrink is pending: evicts what is past its target and completes it once nothing
  // is (the resize thread's loop; started by Resize and by a start that finds one pending).
  void StartShrinkWatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(policy_mu_);
  void ShrinkWatch();

  // Exclusive tiers: frees slots so that `need` and the reserve are free or coming (BlockMap).
  void RelieveSlotPressure(uint32_t need);
  // Takes `n` free slots (all or none), waiting for the reclaimer while too few are free.
  // REQUIRES: no stripe lock held (the reclaimer needs stripes to free slots).
  absl::Status AllocateSlots(uint32_t n, std::vector<uint32_t>* out,
                             absl::Time deadline = absl::InfiniteFuture());

  const CacheNodeConfig config_;
  datanode::DataNodePool* const pool_;
  Clock* const clock_;
  metrics::Registry* const registry_;
  RecoveryStats recovery_;
  ObjectStripes stripes_;
  std::unique_ptr<Ownership> owner_;
  std::unique_ptr<VdiTable> vdis_;
  std::unique_ptr<SlotStore> slots_;
  std::unique_ptr<PoolLoad> load_view_;
  policy::PolicyContext policy_ctx_;  // what per-VDI policies are built for
  absl::Mutex policy_mu_;             // serialises policy switches (and their gauges)
  std::unique_ptr<BlockMap> map_;
  std::shared_ptr<policy::WriteBudget> budget_;  // null: no SSD write budget
  uint64_t wear_base_bytes_ = 0;                 // written before this start (<state>.wear)
  absl::Mutex wear_mu_;
  int64_t wear_saved_us_ ABSL_GUARDED_BY(wear_mu_) = 0;
  std::unique_ptr<SlotRepair> repair_;
  std::unique_ptr<WriteLog> log_;
  std::unique_ptr<BlockWriter> writer_;
  std::unique_ptr<Destager> destager_;

  absl::Mutex gate_mu_;
  std::function<bool()> destage_gate_ ABSL_GUARDED_BY(gate_mu_);
  absl::Mutex data_ring_mu_;  // serialises SetDataRing (pool switch + state file)
  // The shrink thread (ShrinkWatch): runs while a shrink is pending.
  absl::Mutex shrink_mu_ ABSL_ACQUIRED_AFTER(policy_mu_);
  bool shrink_stop_ ABSL_GUARDED_BY(shrink_mu_) = false;
  bool shrink_running_ ABSL_GUARDED_BY(shrink_mu_) = false;
  std::thread shrink_thread_;
  metrics::Counter* slot_waits_ = nullptr;
  metrics::Counter* policy_switches_ = nullptr;
};

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_CACHE_NODE_H_
