// KeyColumns and KeyIndex: a compact BlockKey -> dense id map for the policy engine.
//
// A policy keeps its per-block metadata in flat arrays indexed by a dense 32-bit id (a cache slot,
// a sieve entry, a ghost entry). BasicKeyIndex<Source> is a hash set of ids whose hash and equality
// look the key up in the Source (which stores each id's key), so the table holds 4 bytes per entry
// instead of a 16-byte key plus a value. Heterogeneous lookup (abseil's is_transparent) finds an id
// from a BlockKey. A Source provides
//   BlockKey KeyOf(SlotId id) const;  bool KeyEquals(SlotId id, const BlockKey& key) const;
// KeyColumns is a Source that stores keys column-wise (8 + 4 bytes per id, no padding).
//
// Invariants:
//   1. Every id in an index has its key in the Source, unchanged since it was inserted; erase an
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

  BlockKey KeyOf(SlotId id) const { return BlockKey{vdi_[id], block_[id]}; }
  void Set(SlotId id, const BlockKey& key) {
    vdi_[id] = key.vdi;
    block_[id] = key.block;
  }
  bool KeyEquals(SlotId id, const BlockKey& key) const {
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

// A set of ids, looked up by key. The Source must outlive the index and must not move.
template <typename Source>
class BasicKeyIndex {
 public:
  // `source` is not owned.
  explicit BasicKeyIndex(const Source* source) : set_(0, Hash{source}, Eq{source}) {}
  BasicKeyIndex(const BasicKeyIndex&) = delete;
  BasicKeyIndex& operator=(const BasicKeyIndex&) = delete;

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
    const Source* source;
    size_t operator()(SlotId id) const { return HashBlockKey(source->KeyOf(id)); }
    size_t operator()(const BlockKey& key) const { return HashBlockKey(key); }
  };
  struct Eq {
    using is_transparent = void;
    const Source* source;
    bool operator()(SlotId a, SlotId b) const { return a == b; }
    bool operator()(SlotId a, const BlockKey& b) const { return source->KeyEquals(a, b); }
    bool operator()(const BlockKey& a, SlotId b) const { return source->KeyEquals(b, a); }
  };
  absl::flat_hash_set<SlotId, Hash, Eq> set_;
};

using KeyIndex = BasicKeyIndex<KeyColumns>;

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_KEY_INDEX_H_
