// SlotRepair: reads a cached block from its SSD slot, and when a dirty block's slot fails its
// checksum, serves it from the only other copy — its write-back log record on the data nodes —
// and rewrites it into a fresh slot. Used by reads, destage and relog alike, and at a warm
// restart for slots recovery found damaged.
//
// Thread-safety: thread-safe. Never waits for a free slot (callers may hold a stripe lock, and
// the reclaimer that frees slots needs stripes): without one the log record keeps serving.
#ifndef RINGCACHE_CACHENODE_SLOT_REPAIR_H_
#define RINGCACHE_CACHENODE_SLOT_REPAIR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "cachenode/block_map.h"
#include "datanode/client/datanode_pool.h"
#include "cachenode/slot_store.h"
#include "common/clock.h"
#include "common/metrics.h"

namespace ringcache::cachenode {

class SlotRepair {
 public:
  // Nothing is owned; everything must outlive this.
  SlotRepair(uint32_t node_id, uint32_t block_size, SlotStore* slots, BlockMap* map,
             datanode::DataNodePool* pool, Clock* clock, metrics::Registry* registry);

  // Reads `slot` of `key` (block `block_in_object` of `object`) into `dst`. A damaged dirty
  // block is repaired from its log record; a damaged clean one returns the error (the caller
  // fetches it from a data node and forgets the slot).
  absl::Status ReadBlock(const BlockKey& key, uint64_t object, uint32_t block_in_object,
                         uint32_t slot, bool dirty, char* dst);
  // One block of a ReadBlocks batch: in everything but `status`.
  struct BlockRead {
    BlockKey key;
    uint64_t object = 0;
    uint32_t block_in_object = 0;
    uint32_t slot = 0;
    bool dirty = false;
    char* dst = nullptr;
    absl::Status status;
  };
  // ReadBlock for several blocks at once: adjacent slots are read with one scatter read
  // (SlotStore::ReadSlots); each block gets its own status and repair.
  void ReadBlocks(std::vector<BlockRead>* blocks);
  // Serves a dirty block whose SSD slot failed its checksum from its log record into `dst`, and
  // rewrites the slot when one is free. REQUIRES: the object's stripe lock is held.
  absl::Status RepairDirtyBlock(const BlockKey& key, uint64_t object, uint32_t block_in_object,
                                char* dst);
  // Rewrites a damaged recovered slot from its log record, retrying for a while (data nodes
  // may still be starting). REQUIRES: during start-up, before any request.
  absl::Status RepairRecoveredSlot(const RecoveredSlot& r);

 private:
  const uint32_t node_id_;
  const uint32_t block_size_;
  SlotStore* const slots_;
  BlockMap* const map_;
  datanode::DataNodePool* const pool_;
  Clock* const clock_;
  metrics::Counter* checksum_failures_;
  metrics::Counter* repairs_;
};

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_SLOT_REPAIR_H_
