// SlotTable: the flat per-block metadata of a single-tier cache, shared by the driver and the
// queue orders (LRU, FIFO, ARC, S3-FIFO, CFLRU) that link its slots into intrusive lists.
//
// One 24-byte record per cache block, allocated once at construction (capacity fixed): the key,
// prev/next links and one meta byte (dirty bit + 7 order-private bits), kept together so a lookup
// and the list update that follows touch one cache line; plus the key index (one 4-byte id and one
// control byte per hash bucket). No per-access allocation.
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

// prev/next arrays for intrusive doubly linked lists over dense ids (used by KeyLru). SlotTable
// offers the same four link methods over its records.
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

// A list header over a link store L (Links or SlotTable): head is the most recent end, tail the
// eviction end.
struct SlotList {
  SlotId head = kNoSlot;
  SlotId tail = kNoSlot;
  uint32_t size = 0;

  bool empty() const { return size == 0; }

  // Inserts `id` at the head. REQUIRES: `id` is on no list.
  template <typename L>
  void PushFront(L& links, SlotId id) {
    links.set_prev(id, kNoSlot);
    links.set_next(id, head);
    if (head != kNoSlot) {
      links.set_prev(head, id);
    } else {
      tail = id;
    }
    head = id;
    ++size;
  }
  // Removes `id`. REQUIRES: `id` is on this list.
  template <typename L>
  void Unlink(L& links, SlotId id) {
    const SlotId p = links.prev(id);
    const SlotId n = links.next(id);
    if (p != kNoSlot) {
      links.set_next(p, n);
    } else {
      head = n;
    }
    if (n != kNoSlot) {
      links.set_prev(n, p);
    } else {
      tail = p;
    }
    links.set_prev(id, kNoSlot);
    links.set_next(id, kNoSlot);
    --size;
  }
  // Moves `id` to the head. REQUIRES: `id` is on this list.
  template <typename L>
  void MoveToFront(L& links, SlotId id) {
    if (head == id) return;
    Unlink(links, id);
    PushFront(links, id);
  }
};

class SlotTable {
 public:
  static constexpr uint8_t kDirtyBit = 0x80;
  static constexpr uint8_t kAuxMask = 0x7f;

  // REQUIRES: 0 < capacity < kNoSlot.
  explicit SlotTable(size_t capacity);
  SlotTable(const SlotTable&) = delete;
  SlotTable& operator=(const SlotTable&) = delete;

  size_t capacity() const { return records_.size(); }
  size_t used() const { return used_; }
  bool full() const { return used_ == records_.size(); }

  // Returns the slot holding `key`, or kNoSlot.
  SlotId Find(const BlockKey& key) const { return index_.Find(key); }
  // Takes a free slot for `key` and indexes it; aux bits start at 0.
  // REQUIRES: !full() and `key` not present.
  SlotId Allocate(const BlockKey& key, bool dirty);
  // Unindexes `id` and returns it to the free chain. REQUIRES: `id` used and on no list.
  void Free(SlotId id);

  BlockKey key(SlotId id) const { return KeyOf(id); }
  bool dirty(SlotId id) const { return (records_[id].meta & kDirtyBit) != 0; }
  void set_dirty(SlotId id, bool d) {
    uint8_t& m = records_[id].meta;
    m = d ? (m | kDirtyBit) : (m & kAuxMask);
  }
  // Order-private bits (7): which sub-list, a frequency counter, ...
  uint8_t aux(SlotId id) const { return records_[id].meta & kAuxMask; }
  void set_aux(SlotId id, uint8_t aux) {
    uint8_t& m = records_[id].meta;
    m = static_cast<uint8_t>((m & kDirtyBit) | (aux & kAuxMask));
  }

  // Link store for SlotList (the records' prev/next).
  SlotTable& links() { return *this; }
  const SlotTable& links() const { return *this; }
  SlotId prev(SlotId id) const { return records_[id].prev; }
  SlotId next(SlotId id) const { return records_[id].next; }
  void set_prev(SlotId id, SlotId p) { records_[id].prev = p; }
  void set_next(SlotId id, SlotId n) { records_[id].next = n; }

  // Key source for the index.
  BlockKey KeyOf(SlotId id) const { return BlockKey{records_[id].vdi, records_[id].block}; }
  bool KeyEquals(SlotId id, const BlockKey& key) const {
    return records_[id].block == key.block && records_[id].vdi == key.vdi;
  }

  // Returns the bytes held by the records and the key index.
  size_t MetadataBytes() const;

 private:
  struct Record {
    uint64_t block;
    uint32_t vdi;
    SlotId prev;  // towards the head (more recent); the free chain uses `next` only
    SlotId next;  // towards the tail (eviction end)
    uint8_t meta;
  };
  static_assert(sizeof(Record) == 24);

  size_t used_ = 0;
  SlotId free_head_;
  std::vector<Record> records_;
  BasicKeyIndex<SlotTable> index_;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_SLOT_TABLE_H_
