// SlotTable: the flat per-block metadata of a single-tier cache, shared by the driver and the
// queue orders (LRU, FIFO, ARC, S3-FIFO, CFLRU) that link its slots into intrusive lists.
//
// One slot per cache block, allocated once at construction (capacity fixed): the key (12 bytes,
// column-wise), prev/next links (8 bytes) and one meta byte (dirty bit + 7 order-private bits),
// plus the key index (about 5 bytes per hash bucket). No per-access allocation.
//
// Invariants:
//   1. A slot is either free (on the free chain, not indexed) or used (indexed by its key).
//   2. A used slot is on exactly one SlotList, owned by one Order; its links belong to that list.
//   3. The dirty bit is meaningful only for used slots.
//
// Thread-safety: not thread-safe; owned by one CacheDriver.
#ifndef RINGCACHE_CACHENODE_POLICY_SLOT_TABLE_H_
#define RINGCACHE_CACHENODE_POLICY_SLOT_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cachenode/policy/key_index.h"
#include "cachenode/policy/types.h"

namespace ringcache::policy {

// prev/next arrays for intrusive doubly linked lists over dense ids.
class Links {
 public:
  void Resize(size_t n) {
    prev_.resize(n, kNoSlot);
    next_.resize(n, kNoSlot);
  }
  SlotId prev(SlotId id) const { return prev_[id]; }
  SlotId next(SlotId id) const { return next_[id]; }
  void set_prev(SlotId id, SlotId p) { prev_[id] = p; }
  void set_next(SlotId id, SlotId n) { next_[id] = n; }
  size_t MemoryBytes() const { return (prev_.capacity() + next_.capacity()) * sizeof(SlotId); }

 private:
  std::vector<SlotId> prev_;  // towards the head (more recent)
  std::vector<SlotId> next_;  // towards the tail (eviction end)
};

// A list header over Links: head is the most recent end, tail the eviction end.
struct SlotList {
  SlotId head = kNoSlot;
  SlotId tail = kNoSlot;
  uint32_t size = 0;

  bool empty() const { return size == 0; }
  // Inserts `id` at the head. REQUIRES: `id` is on no list.
  void PushFront(Links& links, SlotId id);
  // Removes `id`. REQUIRES: `id` is on this list.
  void Unlink(Links& links, SlotId id);
  // Moves `id` to the head. REQUIRES: `id` is on this list.
  void MoveToFront(Links& links, SlotId id);
};

class SlotTable {
 public:
  static constexpr uint8_t kDirtyBit = 0x80;
  static constexpr uint8_t kAuxMask = 0x7f;

  // REQUIRES: 0 < capacity < kNoSlot.
  explicit SlotTable(size_t capacity);
  SlotTable(const SlotTable&) = delete;
  SlotTable& operator=(const SlotTable&) = delete;

  size_t capacity() const { return capacity_; }
  size_t used() const { return used_; }
  bool full() const { return used_ == capacity_; }

  // Returns the slot holding `key`, or kNoSlot.
  SlotId Find(const BlockKey& key) const { return index_.Find(key); }
  // Takes a free slot for `key` and indexes it; aux bits start at 0.
  // REQUIRES: !full() and `key` not present.
  SlotId Allocate(const BlockKey& key, bool dirty);
  // Unindexes `id` and returns it to the free chain. REQUIRES: `id` used and on no list.
  void Free(SlotId id);

  BlockKey key(SlotId id) const { return keys_.Get(id); }
  bool dirty(SlotId id) const { return (meta_[id] & kDirtyBit) != 0; }
  void set_dirty(SlotId id, bool d) {
    meta_[id] = d ? (meta_[id] | kDirtyBit) : (meta_[id] & kAuxMask);
  }
  // Order-private bits (7): which sub-list, a frequency counter, ...
  uint8_t aux(SlotId id) const { return meta_[id] & kAuxMask; }
  void set_aux(SlotId id, uint8_t aux) {
    meta_[id] = static_cast<uint8_t>((meta_[id] & kDirtyBit) | (aux & kAuxMask));
  }

  Links& links() { return links_; }
  const Links& links() const { return links_; }

  // Returns the bytes held by the slot arrays and the key index.
  size_t MetadataBytes() const;

 private:
  size_t capacity_;
  size_t used_ = 0;
  SlotId free_head_;  // chained through links_.next
  KeyColumns keys_;
  Links links_;
  std::vector<uint8_t> meta_;
  KeyIndex index_;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_SLOT_TABLE_H_
