// BlockMap: what the cache node holds, with no I/O — one entry per cached block (its SSD slot,
// RAM copy, dirtiness, log record, ownership epoch), the membership policy and the RAM/SSD
// placement, the index of dirty blocks in destage order, and the queue of reclaim work (evicted
// blocks to destage and free, RAM blocks to demote). Everything happens under one lock, held only
// for in-memory work: callers get plans (what to read, where to write, what to free) and do the
// I/O themselves outside it, then report back.
//
// Dirtiness has one truth, BlockEntry::dirty. The dirty index (a set, and per VDI a queue in the
// order blocks became dirty) and the per-VDI dirty counter follow it: only MarkDirty/MarkClean
// below change any of them.
//
// Invariants (cache_node.h states the node's): an entry in state kEvicting is no longer a policy
// member but keeps serving reads until the reclaimer has destaged it (if dirty) and freed it; a
// dirty entry has an SSD slot.
//
// Exclusive tiers (placement "NAME(exclusive)"): the policy holds SSD slots + RAM blocks, so the
// RAM tier adds capacity, and slots can run out before the membership does. RelieveSlotPressure
// then frees some: first the shadow slots of clean blocks in RAM (the block stays, in RAM only),
// then members the policy sheds.
//
// Thread-safety: thread-safe. Lock order: object stripe (stripes.h) > BlockMap > VdiTable.
#ifndef RINGCACHE_CACHENODE_BLOCK_MAP_H_
#define RINGCACHE_CACHENODE_BLOCK_MAP_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cachenode/policy/placement.h"
#include "cachenode/policy/registry.h"
#include "cachenode/policy/shadow_queue.h"
#include "cachenode/policy/types.h"
#include "cachenode/policy/write_budget.h"
#include "cachenode/slot_store.h"
#include "cachenode/vdi_table.h"
#include "common/clock.h"
#include "common/metrics.h"

namespace ringcache::cachenode {

using policy::BlockKey;

enum class BlockState : uint8_t { kCached, kEvicting };

struct BlockEntry {
  int64_t slot = -1;                       // SSD slot, -1 if none
  std::shared_ptr<const std::string> ram;  // RAM copy (RAM tier), null if none
  bool dirty = false;
  BlockState state = BlockState::kCached;
  uint64_t log_seq = 0;                    // dirty: its write-back log record (0 = none)
  uint64_t epoch = 0;                      // dirty: ownership epoch it was accepted at
  int64_t dirty_since_us = 0;              // dirty: when it became dirty (clock microseconds)
  // Dirty: the data nodes its log record landed on (empty: unknown, as after a restart).
  absl::InlinedVector<uint32_t, 2> log_nodes;
};

// Storage a BlockMap change let go of; the caller gives it back outside the map's lock.
struct Leftovers {
  std::vector<uint32_t> slots;     // SSD slots to release
  std::vector<uint64_t> log_seqs;  // write-back log records to retire
};

// How to serve one block of a read.
struct ReadPlan {
  std::shared_ptr<const std::string> ram;
  int64_t slot = -1;
  bool miss = false;
  bool admit = false;    // fill the cache after fetching
  bool promote = false;  // SSD hit that the placement moved to RAM
  bool dirty = false;
};

// A block the reclaimer must handle: an evicted one to destage and free, or a RAM one to demote.
struct ReclaimWork {
  BlockKey key;
  bool demote = false;
  bool retried = false;  // a demotion that found no slot once and relieved slot pressure
};

// A dirty block as the destager and relog read it.
struct DirtyCopy {
  std::shared_ptr<const std::string> ram;
  int64_t slot = -1;
  uint64_t log_seq = 0;
  uint64_t epoch = 0;
};

// Adjacent dirty blocks of one object, to be written home as one run.
struct DestageRun {
  uint64_t first_block = 0;  // block index inside the VDI
  std::vector<DirtyCopy> blocks;
};

// A write the caller made durable (SSD slots, and the log for write-back), to enter the map.
struct WriteCommit {
  const VdiInfo* vdi = nullptr;
  uint64_t object = 0;
  uint32_t first = 0;  // first block inside the object
  uint32_t count = 0;
  const uint32_t* slots = nullptr;  // count slots, written
  bool through = false;             // write-through: clean, no log record
  uint64_t log_seq = 0;             // write-back: block i's record is log_seq + i
  uint64_t epoch = 0;
  const std::vector<uint32_t>* landed = nullptr;  // write-back: data nodes holding the records
  const char* data = nullptr;       // count blocks (a RAM copy is made if placed in RAM)
};

class BlockMap {
 public:
  // `vdis`, `clock`, `evictions` and `shed` (may be null: counts RelieveSlotPressure's
  // evictions) are not owned and must outlive the map.
  BlockMap(std::unique_ptr<policy::CachePolicy> policy,
           std::unique_ptr<policy::Placement> placement, uint32_t block_size, VdiTable* vdis,
           Clock* clock, metrics::Counter* evictions, metrics::Counter* shed = nullptr);

  // Warm restart: a recovered slot enters the map (and the policy, as a write); one that
  // replaces an entry (a damaged block rewritten from its log) gives the older slot back.
  void AdoptRecovered(const RecoveredSlot& r, Leftovers* out);

  // Whether each of `count` blocks has a RAM copy or an SSD slot now (a read of them needs no
  // data node). Read-only: no policy access, no counters. Any lock state.
  bool AllStored(const VdiInfo& v, uint64_t object, uint32_t first, uint32_t count) const;

  // --- Reads (REQUIRES: the object's stripe lock is held, for all of these)
  // Asks the policy and placement about `count` blocks and says how to serve each.
  void PlanRead(const VdiInfo& v, uint64_t object, uint32_t first, uint32_t count,
                std::vector<ReadPlan>* plan);
  // Reads of at least `blocks` blocks are streams: their SSD hits are served from the SSD and
  // leave the RAM/SSD placement as it is (no promotion, no demotion). 0 = every hit counts.
  void set_stream_read_blocks(uint32_t blocks) { stream_read_blocks_ = blocks; }
  // After a fetched miss (admit) or an SSD hit the placement moved to RAM (promote): keeps
  // `copy` in RAM if that is where the block goes now (a promoted block keeps its SSD slot as a
  // shadow copy). Returns true when the block needs an SSD slot instead (then call
  // PlaceFilled).
  bool FillOrPromote(const BlockKey& key, bool promote, std::shared_ptr<const std::string> copy);
  // Stores a filled block's slot (nullopt: it could not be written). False when the slot was
  // not used (the caller releases it); a block that could not be stored leaves the cache.
  bool PlaceFilled(const BlockKey& key, std::optional<uint32_t> slot);
  // Sets (*allocated)[i] for each block of the run that the map holds dirty: not home yet. (A
  // clean block is a copy of its home, whose presence the caller has: a hole read and cached
  // as zeros stays a hole.)
  void MarkDirty(const VdiInfo& v, uint64_t object, uint32_t first, std::vector<bool>* allocated);

  // --- Writes
  // Passes `count` written blocks through the policy; true if it sends them past the cache: a
  // bypass fired, or an admission that judges writes refused a missed block and none of the
  // others is held or admitted (write-around).
  bool AccessForWrite(const VdiInfo& v, uint64_t object, uint32_t first, uint32_t count);
  void CommitWrite(const WriteCommit& w, Leftovers* out);
  // Forgets a block (policy, placement, map).
  void Invalidate(const BlockKey& key, Leftovers* out);

  // --- Dirty blocks
  std::optional<DirtyCopy> DirtyBlock(const BlockKey& key) const;
  // The dirty blocks of one object from around `key` on, at most `max_blocks` (1: only `key`),
  // or nullopt if `key` is not dirty.
  std::optional<DestageRun> PlanDestage(const BlockKey& key, uint64_t blocks_per_object,
                                        uint32_t max_blocks) const;
  // The run reached every home: clean now. *clean_slots: slots whose index entry to mark clean.
  void MarkDestaged(uint32_t vdi, uint64_t first_block, size_t n,
                    std::vector<uint32_t>* clean_slots, Leftovers* out);
  // After the caller marked MarkDestaged's clean_slots clean: the blocks of the run that are in
  // RAM may give their slot up under slot pressure now (exclusive tiers; not before, or the
  // slot could be someone else's when marked).
  void NoteDestagedShadows(uint32_t vdi, uint64_t first_block, size_t n);
  // A home refused the block as older than its copy: it is dropped, with its log record.
  void DiscardObsolete(const BlockKey& key, Leftovers* out);
  // A dirty block's slot was rewritten from record `log_seq`: uses `slot` if the block still
  // names that record and returns the slot to release (the old one, or `slot`).
  int64_t SwapRepairedSlot(const BlockKey& key, uint64_t log_seq, uint32_t slot);
  // The block was logged again as `new_seq` on `landed` (if it still names `old_seq`).
  void MoveLogRecord(const BlockKey& key, uint64_t old_seq, uint64_t new_seq,
                     const std::vector<uint32_t>& landed);
  // Takes the block to destage next (coldest VDI, oldest dirty; destage_planner.h); with
  // `oldest_vdi_first` (aging destage) from the VDI whose oldest dirty block is the oldest.
  std::optional<BlockKey> NextDirty(bool oldest_vdi_first = false);
  // Takes `vdi`'s block to destage next (the one dirtied longest ago), nullopt with none.
  std::optional<BlockKey> NextDirtyOf(uint32_t vdi);
  // How long the VDI's oldest dirty block has been dirty (0 with none), whatever the destage
  // order did with it (a block whose destage failed waits behind newer ones).
  absl::Duration OldestDirtyAge(uint32_t vdi) const;
  // The same over every VDI of the node.
  absl::Duration OldestDirtyAge() const;
  // Puts a block NextDirty gave back at the end (front: where it was) of its VDI's queue.
  void RequeueDirty(const BlockKey& key, bool front = false);
  // Dirty blocks `keep` selects; those whose log record sits (or may sit) on a node in `lost`.
  std::vector<BlockKey> DirtyKeys(const std::function<bool(const BlockKey&)>& keep) const;
  std::vector<BlockKey> DirtyLoggedOn(const absl::flat_hash_set<uint32_t>& lost) const;
  // Dirty blocks whose current log record has one of `seqs`.
  std::vector<BlockKey> DirtyWithLogSeq(const absl::flat_hash_set<uint64_t>& seqs) const;
  absl::flat_hash_set<uint64_t> LiveLogSeqs() const;

  // --- Slot pressure (exclusive tiers; a no-op otherwise)
  // `free` slots are free and the caller needs `need`: when fewer than need + headroom are free
  // or on their way back (evicted blocks with a slot, queued for the reclaimer), gives shadow
  // slots of clean RAM blocks to out->slots (oldest first), then evicts members
  // (CachePolicy::Shed) until enough slots are coming, or the policy holds none. Returns how
  // many slots it freed or queued. The caller releases out->slots. Any lock state except this
  // map's.
  uint32_t RelieveSlotPressure(uint32_t free, uint32_t need, Leftovers* out);
  // Slots to keep free beyond what callers ask for (the cache node's slot reserve). Set before
  // serving.
  void set_slot_headroom(uint32_t slots) {
    slot_headroom_.store(slots, std::memory_order_relaxed);
  }
  bool exclusive() const { return exclusive_; }

  // --- SSD write budget (policy/write_budget.h; the policy was built with it in its context)
  // Charges `budget` with the SSD block writes `written()` counts (the slot store's), on this
  // map's clock, before each policy access. Set before serving.
  void set_write_budget(std::shared_ptr<policy::WriteBudget> budget,
                        std::function<uint64_t()> written) {
    absl::MutexLock l(&mu_);
    budget_ = std::move(budget);
    budget_written_ = std::move(written);
    budget_charged_ = budget_written_();
  }
  // The budget's state, or nullopt without one.
  std::optional<policy::WriteBudget::Snapshot> BudgetSnapshot() const;
  uint64_t shed_blocks() const {
    absl::MutexLock l(&mu_);
    return shed_;
  }

  // --- Reclaim work
  // Waits up to `wait` for work; false if none (or after Shutdown).
  bool TakeWork(absl::Duration wait, ReclaimWork* w);
  void AddWork(const ReclaimWork& w);
  void Shutdown();
  // Demotion of a RAM block the placement moved out: the copy to write to a fresh slot, or null
  // when there is nothing to write (gone, back in RAM, or dirty: its slot has it already).
  std::shared_ptr<const std::string> BeginDemote(const BlockKey& key);
  // The demoted copy is in `slot`; false if the block changed meanwhile (release `slot`).
  bool FinishDemote(const BlockKey& key, const std::shared_ptr<const std::string>& ram,
                    uint32_t slot);
  // No slot for a demotion: the clean block leaves the cache (if unchanged).
  void DropUndemoted(const BlockKey& key, const std::shared_ptr<const std::string>& ram,
                     Leftovers* out);
  // An evicted block: nullopt if it is no longer evicting, else whether it is dirty.
  std::optional<bool> EvictingDirty(const BlockKey& key) const;
  // Frees an evicted block that is clean now.
  void FinishEvict(const BlockKey& key, Leftovers* out);

  // --- Queries
  // Calls `fn` for every cached block (under the lock: no I/O, no BlockMap call in `fn`).
  void ForEach(const std::function<void(const BlockKey&, const BlockEntry&)>& fn) const;
  uint64_t dirty_blocks() const;
  uint64_t cached_blocks() const;
  std::vector<policy::VdiStats> VdiStats() const;

  // --- Online resize of the tiers (CacheNode::Resize)
  struct Rebuilt {
    uint64_t members = 0;  // blocks passed to the new policy
    uint64_t evicted = 0;  // of them, those it evicted to fit (destaged if dirty, then freed)
  };
  // Replaces the policy with `fresh` (built for the new capacity, with the VDIs' own policies
  // and shares already set) in one step under the lock: the old one gives up its members in
  // its eviction order (CachePolicy::TakeMembers: each queue coldest first; a policy that cannot
  // say gives them in no order), and each enters the new one (CachePolicy::Adopt) with its
  // dirtiness. What the
  // new one evicts to fit leaves as any eviction does. The policies' learned state (ghosts,
  // sketches, VBQ's shares) starts over, as after a restart.
  Rebuilt ReplacePolicy(std::unique_ptr<policy::CachePolicy> fresh);
  // Evicts every block whose SSD slot is `first` or past it (a shrink's released region): each
  // leaves as an eviction does (destaged first if dirty); returns how many it sent. Blocks on
  // their way out already are not counted.
  uint64_t EvictSlotsFrom(uint32_t first);
  // Gives the RAM tier `blocks` of room (Placement::SetRamCapacity; same REQUIRES). The blocks
  // a smaller tier no longer holds leave RAM as any demotion does (to their SSD slot; a clean
  // RAM-only one the sieve finds not worth a slot leaves the cache); returns how many.
  uint64_t ResizeRam(size_t blocks);
  // The RAM tier's room, and the blocks it holds now: those the placement keeps in RAM and those
  // on their way out (demotions not done yet).
  size_t ram_capacity() const;
  size_t ram_held() const;

  // --- Per-VDI policies (policy/registry.h SetVdiPolicy)
  // Switches `vdi` to `spec` ("" or "default": the node's policy). The VDI's cached blocks stay,
  // dirty ones too; the switch is one step under the lock, between two accesses.
  absl::Status SetVdiPolicy(uint32_t vdi, const std::string& spec,
                            const policy::PolicyContext& ctx);
  // The spec `vdi` runs under: its own, or the node policy's name.
  std::string VdiPolicy(uint32_t vdi) const;
  // Gives `vdi` a share of the cache (policy::SetVdiShare).
  absl::Status SetVdiShare(uint32_t vdi, double min, double max);

 private:
  uint32_t stream_read_blocks_ = 0;  // set before serving, then read-only
  std::atomic<uint32_t> slot_headroom_{0};  // changed by an online resize
  void ApplyEvictions(const policy::Outcome& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PushDemotions(const std::vector<BlockKey>& demote) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkDirty(const BlockKey& key, BlockEntry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkClean(const BlockKey& key, BlockEntry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveLocked(const BlockKey& key, Leftovers* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Exclusive tiers: remembers that `key` (clean, in RAM, with a slot) has a shadow slot.
  void NoteShadow(const BlockKey& key, const BlockEntry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsShadow(const BlockKey& key) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetLocked(const BlockKey& key, Leftovers* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountDirty(uint32_t vdi, int delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  policy::Access NextAccess(const BlockKey& key, policy::Op op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint32_t block_size_;
  VdiTable* const vdis_;
  Clock* const clock_;
  metrics::Counter* const evictions_;
  metrics::Counter* const shed_counter_;
  const bool exclusive_;

  mutable absl::Mutex mu_;
  std::unique_ptr<policy::CachePolicy> policy_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<policy::Placement> placement_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<BlockKey, BlockEntry> map_ ABSL_GUARDED_BY(mu_);
  // Pops the front of `vdi`'s dirty queue (skipping blocks cleaned meanwhile).
  std::optional<BlockKey> PopDirtyLocked(uint32_t vdi) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::flat_hash_set<BlockKey> dirty_set_ ABSL_GUARDED_BY(mu_);
  // dirty_set_.size(), changed under mu_ and read without it (dirty_blocks()).
  std::atomic<uint64_t> dirty_count_{0};
  // Per VDI, the times its dirty blocks became dirty (BlockEntry::dirty_since_us), with counts.
  absl::flat_hash_map<uint32_t, absl::btree_map<int64_t, uint32_t>> dirty_since_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, std::deque<BlockKey>> dirty_order_ ABSL_GUARDED_BY(mu_);
  std::deque<ReclaimWork> work_ ABSL_GUARDED_BY(mu_);
  // Exclusive tiers: blocks that became shadows, oldest first (stale entries skipped).
  policy::ShadowQueue shadows_ ABSL_GUARDED_BY(mu_);
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t shed_ ABSL_GUARDED_BY(mu_) = 0;  // members evicted by RelieveSlotPressure
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<policy::WriteBudget> budget_ ABSL_GUARDED_BY(mu_);
  std::function<uint64_t()> budget_written_ ABSL_GUARDED_BY(mu_);
  uint64_t budget_charged_ ABSL_GUARDED_BY(mu_) = 0;  // budget_written_() when last charged
};

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_BLOCK_MAP_H_
