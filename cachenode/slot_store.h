// SlotStore: the cache node's SSD tier — a preallocated file (or block device) of fixed-size slots
// with a persistent index, so a restart (even after kill -9) keeps clean and dirty blocks.
//
// File layout (little-endian):
//   [0, 4 KiB)                      superblock: magic, version, block_size, slot count, the
//                                   store's identity (node id, incarnation), checksum; at 64
//                                   the cluster record (cluster id, checksum; zeros: none); at
//                                   512 the extent table (version 3 only, below)
//   [4 KiB, 4 KiB + 64·N rounded)   index: one 64-byte entry per slot (IndexEntry below)
//   [data_offset, + N·block_size)   data: slot i's block at data_offset + i·block_size
//
// Online resize (Resize, FinishShrink; docs/cache-node.md "Resizing the tiers"): a store that
// was resized is version 3 and lists its extents, each an index region and a data region of
// consecutive slots; the first is the layout above, a growth adds one at the end of the file
// (or lengthens the last one while its index has room). A shrink first stops handing out the
// slots past its target (persisted: a restart resumes it), the cache node moves their blocks
// out, then FinishShrink cuts the extents and the file. Slot numbers never change.
//
// Invariants:
//  1. A block is never overwritten in place: every write goes to a fresh slot with a higher
//     sequence number, and the previous slot of that key is released only afterwards. A crash in
//     the middle of a write therefore leaves the previous version intact.
//  2. An entry is valid iff its own checksum matches; its data is valid iff the data checksum
//     matches. Recovery keeps, per key, the valid entry with the highest sequence whose data
//     verifies; everything else is freed.
//  3. Sync() makes every earlier WriteSlot/SetDirty/Release durable (fdatasync, group commit:
//     concurrent callers share one fdatasync).
//  4. Storage errors are sticky: after a failed write or fdatasync, no Sync() returns OK again
//     (Linux reports a writeback error once and may drop the pages; a retry would "succeed").
//
// Thread-safety: thread-safe. Callers must not write a slot while another thread reads it; the
// cache node guarantees this with pins (cachenode/cache_node.h).
#ifndef RINGCACHE_CACHENODE_SLOT_STORE_H_
#define RINGCACHE_CACHENODE_SLOT_STORE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cachenode/policy/types.h"
#include "common/file.h"

namespace ringcache::cachenode {

// A slot's block: the policy's key (VDI id, block index inside the VDI); one key type for the
// whole cache node.
using SlotKey = policy::BlockKey;

// A slot found valid at Open().
struct RecoveredSlot {
  uint32_t slot = 0;
  SlotKey key;
  bool dirty = false;
  uint64_t seq = 0;
  uint64_t log_seq = 0;  // dirty blocks: sequence of their write-back log record (0 = none)
  // The data failed its checksum; the slot is kept only so the cache node can rewrite it from
  // the log record `log_seq` (an older good version of the key, if any, is listed before it).
  bool damaged = false;
  uint64_t epoch = 0;    // dirty blocks: ownership epoch the write was accepted at
};

struct SlotStoreOptions {
  std::string path;            // file (created and preallocated if missing) or block device
  uint64_t capacity_bytes = 0; // data area size; slot count = capacity / block_size
  uint32_t block_size = 4096;
  // The cache node the store belongs to (0: unchecked). A store created or first opened with an
  // id keeps it; opening it for another node fails.
  uint32_t node_id = 0;
  // The cluster the node serves (ClusterFile::cluster_id; empty: unchecked). A store keeps the
  // id it was created or first opened with; opening it for another cluster fails.
  std::string cluster_id{};
  absl::Status Validate() const;
};

struct RecoveryStats {
  uint64_t slots_valid = 0;
  uint64_t slots_dirty = 0;
  uint64_t stale_versions = 0;    // older versions superseded by a newer valid one
  uint64_t torn_or_corrupt = 0;   // entries whose data failed its checksum
};

class SlotStore {
 public:
  // Opens or creates the store. On an existing file the geometry must match `options` (a
  // mismatch is kFailedPrecondition: the operator must wipe the file to change it). Fills
  // *recovered with every valid slot (one per key) and frees the rest. `file` (may be null:
  // the POSIX file at options.path) is the I/O seam tests inject faults through.
  static absl::StatusOr<std::unique_ptr<SlotStore>> Open(const SlotStoreOptions& options,
                                                         std::vector<RecoveredSlot>* recovered,
                                                         RecoveryStats* stats,
                                                         std::unique_ptr<File> file = nullptr);
  ~SlotStore();

  // Every slot of the file, and those a block may take: fewer while a shrink is pending.
  uint32_t num_slots() const { return num_slots_.load(std::memory_order_acquire); }
  uint32_t usable_slots() const;
  // A shrink's target (slots), or 0 with none pending.
  uint32_t shrink_target() const;

  // Online resize to `slots` (at least 16). Growing extends the file (a block device must be
  // large enough) and takes effect at once; it also ends a pending shrink. Shrinking below
  // num_slots() stops handing out the slots at or past `slots` (blocks there stay readable)
  // and persists the target; the caller moves the blocks out (Release) and calls FinishShrink.
  // The first resize makes the file version 3 (older releases refuse it, naming the versions).
  absl::Status Resize(uint32_t slots);
  // Slots in use at or past the pending shrink's target (0 with none pending).
  uint32_t used_past_target() const;
  // Completes a pending shrink once no slot past its target is in use (kFailedPrecondition
  // with the count otherwise): the extents and the file are cut, durably.
  absl::Status FinishShrink();
  // The store's incarnation (32 hex digits), made when it was created: a new device, or a wiped
  // file, is a new incarnation holding nothing of the node's earlier one.
  const std::string& incarnation() const { return incarnation_; }
  // True when the store is a new incarnation the node has not taken over yet: created by this
  // Open, or by an earlier one whose start did not finish (MarkAdopted was not reached).
  bool created() const { return created_; }
  // The node took over from its old incarnation (its log is home): created() is false from now
  // on, also after a restart (persisted, synced).
  absl::Status MarkAdopted();
  uint32_t block_size() const { return block_size_; }
  uint32_t free_slots() const;

  // Takes a free slot, or returns kResourceExhausted.
  absl::StatusOr<uint32_t> Allocate();
  // Takes `n` free slots, all or none (kResourceExhausted), appending them to *out.
  absl::Status AllocateMany(uint32_t n, std::vector<uint32_t>* out);
  // Writes `data` (block_size bytes) and the slot's index entry with a new sequence number and
  // the block's log record sequence and ownership epoch (dirty blocks; 0 = none).
  // Not durable until Sync(). REQUIRES: `slot` came from Allocate() and is not released.
  absl::Status WriteSlot(uint32_t slot, const SlotKey& key, bool dirty, const char* data,
                         uint64_t log_seq = 0, uint64_t epoch = 0);
  // Rewrites the index entry's dirty flag (e.g. clean after destage; clean also forgets the log
  // sequence). Not durable until Sync().
  absl::Status SetDirty(uint32_t slot, bool dirty);
  // Rewrites the index entry's log sequence (the block was logged again). Not durable until
  // Sync().
  absl::Status SetLogSeq(uint32_t slot, uint64_t log_seq);
  // Reads the slot's block into `data` and verifies it against the checksum written with it:
  // kDataLoss on mismatch.
  absl::Status ReadSlot(uint32_t slot, char* data) const;
  // One block of a ReadSlots batch: in `slot` and `data`, out `status` (as ReadSlot's).
  struct SlotRead {
    uint32_t slot = 0;
    char* data = nullptr;
    absl::Status status;
  };
  // Reads several slots, each verified as by ReadSlot. Slots adjacent on the device are read
  // with one scatter read, whatever their order in `reads` (a large request's blocks were
  // usually written together into neighbouring slots). A failed range read is retried slot by
  // slot, so every status is the slot's own.
  void ReadSlots(std::vector<SlotRead>* reads) const;
  // Clears the index entry and returns the slot to the free list.
  absl::Status Release(uint32_t slot);
  // Makes every earlier write durable (group commit). Storage errors are sticky: once a write
  // or fdatasync failed, every later write and Sync returns kDeviceFailed (common/errors.h).
  absl::Status Sync();
  // OK, or the sticky kDeviceFailed error.
  absl::Status failed() const;

  // Blocks written to data slots since the store was opened (WriteSlot calls that succeeded).
  uint64_t blocks_written() const { return blocks_written_.load(std::memory_order_relaxed); }

  // Test-only: returns the file offset of `slot`'s data (to corrupt it on purpose).
  uint64_t DataOffsetForTest(uint32_t slot) const { return DataOffset(slot); }

 private:
  struct Meta {
    SlotKey key;
    uint64_t seq = 0;
    uint64_t checksum = 0;
    bool dirty = false;
    bool used = false;
    uint64_t log_seq = 0;
    uint64_t epoch = 0;
  };
  // Consecutive slots with their index and data regions (version 3's extent table).
  struct Extent {
    uint64_t index_offset = 0;
    uint64_t data_offset = 0;
    uint32_t first = 0;        // first slot
    uint32_t index_slots = 0;  // entries the index region holds (>= the extent's slots)
  };
  static constexpr uint32_t kMaxExtents = 64;  // 63 growths

  SlotStore() = default;
  // Where slot `slot`'s index entry and block are (any thread: extents are only appended,
  // and published by extent_count_).
  const Extent& ExtentOf(uint32_t slot) const;
  uint64_t IndexOffset(uint32_t slot) const;
  uint64_t DataOffset(uint32_t slot) const;
  // Writes the version 3 superblock and extent table (num_slots, shrink target), synced.
  // `extents` of extents_ (the first `extents` may not be published yet).
  absl::Status WriteLayout(uint32_t extents, uint32_t num_slots, uint32_t shrink_to)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(super_mu_);
  // Reads a version 3 store's extent table into extents_; returns its slot count and target.
  absl::Status ReadLayout(uint32_t* num_slots, uint32_t* shrink_to);
  // Records a failed write as the sticky device error and returns kDeviceFailed.
  absl::Status Checked(absl::Status s);
  absl::Status DeviceFailedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(sync_mu_);
  absl::Status WriteEntry(uint32_t slot, const Meta& m);
  absl::Status Recover(std::vector<RecoveredSlot>* recovered, RecoveryStats* stats);

  std::unique_ptr<File> file_;
  std::string path_;
  std::string incarnation_;
  // Serializes superblock writes: MarkAdopted and resizes.
  mutable absl::Mutex super_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  bool created_ = false;
  uint32_t block_size_ = 0;
  std::atomic<uint32_t> num_slots_{0};
  // The extents; [0, extent_count_) are set (an unresized store: one). Written under resize_mu_
  // before extent_count_ publishes them.
  std::array<Extent, kMaxExtents> extents_{};
  std::atomic<uint32_t> extent_count_{0};
  std::atomic<uint64_t> blocks_written_{0};

  mutable absl::Mutex mu_;
  std::vector<Meta> meta_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> free_ ABSL_GUARDED_BY(mu_);
  // Slots at or past it are not handed out (a pending shrink); num_slots_ otherwise.
  uint32_t limit_ ABSL_GUARDED_BY(mu_) = 0;
  // Slots in use at or past limit_ (none is handed out there, so only Release lowers it).
  uint32_t used_past_limit_ ABSL_GUARDED_BY(mu_) = 0;
  void CountUsedPastLimitLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;

  // Group commit: writers bump write_gen_; Sync waits until a completed fdatasync started after
  // its own generation.
  mutable absl::Mutex sync_mu_;
  uint64_t write_gen_ ABSL_GUARDED_BY(sync_mu_) = 0;
  uint64_t synced_gen_ ABSL_GUARDED_BY(sync_mu_) = 0;
  bool sync_running_ ABSL_GUARDED_BY(sync_mu_) = false;
  absl::Status sync_error_ ABSL_GUARDED_BY(sync_mu_);
  void NoteWrite();
};

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_SLOT_STORE_H_
