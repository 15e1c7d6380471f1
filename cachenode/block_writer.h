// BlockWriter: how whole blocks are written once the cache node's front has validated a request,
// taken its object's stripe and checked ownership — in the VDI's cache mode:
//   write-back    SSD slots and, in parallel, log records on N-1 data nodes; durable on both
//                 before the reply (invariants 1 and 4 of cache_node.h);
//   write-through the home replicas first, then a clean cached copy;
//   write-around  the home replicas, and any cached copy dropped (also passthrough, and what the
//                 policy's bypass — CMF, sequential cutoff — does for one request).
// Every write home carries version stamps (log sequence, ownership epoch, writer).
//
// Thread-safety: thread-safe; the caller holds the object's stripe.
#ifndef RINGCACHE_CACHENODE_BLOCK_WRITER_H_
#define RINGCACHE_CACHENODE_BLOCK_WRITER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "cachenode/block_map.h"
#include "cachenode/ownership.h"
#include "cachenode/slot_store.h"
#include "cachenode/vdi_table.h"
#include "cachenode/write_log.h"
#include "datanode/client/datanode_pool.h"

namespace ringcache::cachenode {

// Gives back what a BlockMap change let go of: retires the log records, releases the slots.
// Returns the first release error.
absl::Status GiveBack(const Leftovers& left, SlotStore* slots, WriteLog* log);

class BlockWriter {
 public:
  // Nothing is owned; everything must outlive the writer.
  BlockWriter(uint32_t node_id, uint32_t block_size, BlockMap* map, SlotStore* slots,
              WriteLog* log, datanode::DataNodePool* pool, Ownership* owner);

  // Writes `count` whole blocks from `first` in the VDI's mode, taking the slots it needs from
  // *slots (preallocated by the caller; unused ones stay there). REQUIRES: stripe held.
  absl::Status WriteRun(const VdiInfo& v, uint64_t object, uint32_t first, uint32_t count,
                        const char* data, std::vector<uint32_t>* slots);
  // Drops the whole blocks [first, end) at home (stamped tombstones) and from the cache.
  // REQUIRES: stripe held.
  absl::Status TrimRun(const VdiInfo& v, uint64_t object, uint32_t first, uint32_t end);
  // Forgets one cached block. REQUIRES: stripe held.
  absl::Status Invalidate(const BlockKey& key);

 private:
  // The cached part of a write: SSD slots (and, write-back, the log in parallel), then the map.
  absl::Status StoreRun(const VdiInfo& v, uint64_t object, uint32_t first, uint32_t count,
                        const char* data, bool through, std::vector<uint32_t> slots);
  absl::Status WriteAround(const VdiInfo& v, uint64_t object, uint32_t first, uint32_t count,
                           const char* data);
  // Sends `count` blocks home with fresh version stamps.
  absl::Status WriteHome(const VdiInfo& v, uint64_t object, uint32_t first, uint32_t count,
                         const char* data);
  // `n` fresh stamps at this node's epoch; *first_seq must be given back with log->Done.
  absl::StatusOr<datanode::HomeStamp> FreshStamps(uint32_t n, uint64_t* first_seq);

  const uint32_t node_id_;
  const uint32_t block_size_;
  BlockMap* const map_;
  SlotStore* const slots_;
  WriteLog* const log_;
  datanode::DataNodePool* const pool_;
  Ownership* const owner_;
};

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_BLOCK_WRITER_H_
