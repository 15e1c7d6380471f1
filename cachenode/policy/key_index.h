// KeyColumns and KeyIndex: a compact BlockKey -> dense id map for the policy engine.
//
// A policy keeps its per-block metadata in flat arrays indexed by a dense 32-bit id (a cache slot,
// a sieve entry, a ghost entry). KeyColumns stores the key of every id column-wise (8 + 4 bytes per
// id, no padding); KeyIndex is a hash set of ids whose hash and equality look the key up in the
// columns, so the table holds 4 bytes per entry instead of a 16-byte key plus a value. Heterogeneous
// lookup (abseil's is_transparent) finds an id from a BlockKey.
//
// Invariants:
//   1. Every id in a KeyIndex has its key in the columns, unchanged since it was inserted; erase an
//      id before overwriting its key.
//   2. No two ids in one KeyIndex hold equal keys.
//
// Thread-safety: not thread-safe; owned and driven by one policy object.
#ifndef RINGCACHE_CACHENODE_POLICY_KEY_INDEX_H_
#define RINGCACHE_CACHENODE_POLICY_KEY_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "cachenode/policy/types.h"

namespace ringcache::policy {

// A dense id: a slot in the cache, an entry in a metadata-only list.
using SlotId = uint32_t;
inline constexpr SlotId kNoSlot = 0xffffffffu;

// Keys of ids, column-wise.
class KeyColumns {
 public:
  KeyColumns() = default;
  KeyColumns(const KeyColumns&) = delete;
  KeyColumns& operator=(const KeyColumns&) = delete;

  // Grows or shrinks the columns to `n` ids.
  void Resize(size_t n) {
    block_.resize(n);
    vdi_.resize(n);
  }
  size_t size() const { return block_.size(); }

  BlockKey Get(SlotId id) const { return BlockKey{vdi_[id], block_[id]}; }
  void Set(SlotId id, const BlockKey& key) {
    vdi_[id] = key.vdi;
    block_[id] = key.block;
  }
  bool Equals(SlotId id, const BlockKey& key) const {
    return block_[id] == key.block && vdi_[id] == key.vdi;
  }
  // Returns the bytes the columns hold (allocated capacity).
  size_t MemoryBytes() const {
    return block_.capacity() * sizeof(uint64_t) + vdi_.capacity() * sizeof(uint32_t);
  }

 private:
  std::vector<uint64_t> block_;
  std::vector<uint32_t> vdi_;
};

inline size_t HashBlockKey(const BlockKey& key) { return absl::HashOf(key.vdi, key.block); }

// A set of ids, looked up by key. The columns must outlive the index and must not move.
class KeyIndex {
 public:
  // `columns` is not owned.
  explicit KeyIndex(const KeyColumns* columns)
      : set_(0, Hash{columns}, Eq{columns}) {}
  KeyIndex(const KeyIndex&) = delete;
  KeyIndex& operator=(const KeyIndex&) = delete;

  // Returns the id holding `key`, or kNoSlot.
  SlotId Find(const BlockKey& key) const {
    auto it = set_.find(key);
    return it == set_.end() ? kNoSlot : *it;
  }
  // Adds `id`. REQUIRES: the columns hold id's key and no other id in the index has that key.
  void Insert(SlotId id) { set_.insert(id); }
  // Removes `id`. REQUIRES: `id` is in the index, its key unchanged since Insert.
  void Erase(SlotId id) { set_.erase(id); }
  void Reserve(size_t n) { set_.reserve(n); }
  size_t size() const { return set_.size(); }
  // Returns the bytes of the hash table: one id and one control byte per bucket.
  size_t MemoryBytes() const { return set_.capacity() * (sizeof(SlotId) + 1); }

 private:
  struct Hash {
    using is_transparent = void;
    const KeyColumns* columns;
    size_t operator()(SlotId id) const { return HashBlockKey(columns->Get(id)); }
    size_t operator()(const BlockKey& key) const { return HashBlockKey(key); }
  };
  struct Eq {
    using is_transparent = void;
    const KeyColumns* columns;
    bool operator()(SlotId a, SlotId b) const { return a == b; }
    bool operator()(SlotId a, const BlockKey& b) const { return columns->Equals(a, b); }
    bool operator()(const BlockKey& a, SlotId b) const { return columns->Equals(b, a); }
  };
  absl::flat_hash_set<SlotId, Hash, Eq> set_;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_KEY_INDEX_H_
