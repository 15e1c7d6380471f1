// KeyLru: a bounded, metadata-only list of block keys in recency (or insertion) order, with a small
// tag per entry. It backs the sieve-LRU admission filter (tag = access count, paper 002 §III-C) and
// the ghost lists of ARC (B1, B2) and S3-FIFO (G), which remember keys of blocks no longer cached.
//
// Storage grows on demand up to `max_entries` (then stays: no per-access allocation in the steady
// state); about 12 (key) + 8 (links) + 1 (tag) bytes per entry plus ~5 bytes per index bucket.
//
// Invariants:
//   1. size() <= max_entries(); PushFront on a full list drops the tail first.
//   2. Each key appears at most once.
//
// Thread-safety: not thread-safe; owned by one policy component.
#ifndef RINGCACHE_CACHENODE_POLICY_KEY_LRU_H_
#define RINGCACHE_CACHENODE_POLICY_KEY_LRU_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cachenode/policy/key_index.h"
#include "cachenode/policy/slot_table.h"
#include "cachenode/policy/types.h"

namespace ringcache::policy {

class KeyLru {
 public:
  // REQUIRES: 0 < max_entries < kNoSlot.
  explicit KeyLru(size_t max_entries);
  KeyLru(const KeyLru&) = delete;
  KeyLru& operator=(const KeyLru&) = delete;

  // Returns the entry holding `key`, or kNoSlot.
  SlotId Find(const BlockKey& key) const { return index_.Find(key); }
  // Adds `key` at the head with `tag`, dropping the tail first if full. Returns the new entry.
  // REQUIRES: `key` is absent.
  SlotId PushFront(const BlockKey& key, uint8_t tag);
  // Moves `id` to the head. REQUIRES: `id` is a live entry.
  void MoveToFront(SlotId id) { list_.MoveToFront(links_, id); }
  // Removes entry `id`. REQUIRES: `id` is a live entry.
  void Erase(SlotId id);
  // Removes the tail entry. REQUIRES: !empty().
  void PopBack() { Erase(list_.tail); }

  SlotId back() const { return list_.tail; }
  BlockKey key(SlotId id) const { return keys_.KeyOf(id); }
  uint8_t tag(SlotId id) const { return tags_[id]; }
  void set_tag(SlotId id, uint8_t tag) { tags_[id] = tag; }

  bool empty() const { return list_.empty(); }
  size_t size() const { return list_.size; }
  size_t max_entries() const { return max_entries_; }
  // Returns the bytes held by the entry arrays and the index.
  size_t MemoryBytes() const;

 private:
  SlotId NewEntry();

  size_t max_entries_;
  KeyColumns keys_;
  Links links_;
  std::vector<uint8_t> tags_;
  KeyIndex index_;
  SlotList list_;
  SlotId free_head_ = kNoSlot;  // erased entries, chained through links_.next, reused first
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_KEY_LRU_H_
