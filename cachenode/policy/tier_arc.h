// TierArc: one ARC instance (Megiddo & Modha, FAST'03; summarised in paper 001 §III-A1) whose
// resident lists are split between two storage tiers. It is the building block of the RAM+SSD
// tier caches in tiering.h:
//   - UARC (paper 001 §III-A2, Fig. 1c) uses one TierArc of capacity R+S whose "top" (MRU) segments
//     of T1 and T2 live in RAM (at most R blocks over both lists) and whose "bottom" (LRU) segments
//     live on SSD;
//   - IARC and GARC use two TierArcs, each with top_capacity == capacity, so each lives wholly in
//     one tier and never demotes.
//
// Lists (MRU first):  T1 = T1top ++ T1bot   (resident, seen once)
//                     T2 = T2top ++ T2bot   (resident, seen at least twice)
//                     B1, B2                (ghosts: keys only, evicted from T1 / T2)
// Invariants (checked by CheckInvariantsForTest):
//   1. |T1| + |T2| <= c;  |T1| + |B1| <= c;  |T1| + |T2| + |B1| + |B2| <= 2c.
//   2. |T1top| + |T2top| <= top_capacity; in each list every top block precedes every bottom
//      block (RAM holds the top of each list, SSD the bottom).
//   3. 0 <= p <= c.
//
// Memory: one 32-byte node per directory entry (resident or ghost) in a pool that grows to 2c
// nodes and is then reused, plus a flat hash map from key to node. After warm-up no call
// allocates.
//
// Thread-safety: none; the owner serialises calls (see types.h).
#ifndef RINGCACHE_CACHENODE_POLICY_TIER_ARC_H_
#define RINGCACHE_CACHENODE_POLICY_TIER_ARC_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "cachenode/policy/types.h"

namespace ringcache::policy {

class TierArc {
 public:
  enum List : uint8_t { kT1Top = 0, kT1Bot, kT2Top, kT2Bot, kB1, kB2, kNumLists };

  // A block that left the resident lists (became a ghost or was dropped).
  struct Victim {
    BlockKey key;
    bool dirty = false;
    Tier from = Tier::kNone;
  };

  // What one Request() did.
  struct Result {
    Tier found = Tier::kNone;  // tier that held the block before the request; kNone = miss
    bool ghost_hit = false;    // the key was in B1 or B2 (still a miss)
    bool evicted = false;      // replacement pushed `victim` out of the cache
    Victim victim;
    bool demoted = false;  // a block moved from the top tier to the bottom tier
    BlockKey demoted_key;

    void Reset() { *this = Result(); }
  };

  // REQUIRES: 1 <= capacity <= 2^31 - 1; top_capacity <= capacity. When
  // top_capacity == capacity the instance lives wholly in `top_tier`.
  TierArc(size_t capacity, size_t top_capacity, Tier top_tier, Tier bottom_tier);

  TierArc(const TierArc&) = delete;
  TierArc& operator=(const TierArc&) = delete;

  // Processes one request for `key` as ARC does (cases I-IV of ARC's Fig. 4): a resident block
  // moves to the MRU end of T2 (and its dirty bit is or-ed with `dirty`); a ghost hit adapts p and
  // fetches the block into T2; a miss inserts it at the MRU end of T1. Every block that is
  // (re)inserted lands in the top segment; if the top tier then holds more than top_capacity
  // blocks one block is demoted (see BalanceTop). Fills *r (Reset first).
  void Request(const BlockKey& key, bool dirty, Result* r);

  // Runs Request() if `key` is resident and returns true; otherwise changes nothing and returns
  // false. Saves the caller a separate Resident() probe on the hit path.
  bool RequestIfResident(const BlockKey& key, bool dirty, Result* r);

  // Removes a resident block without leaving a ghost (GARC promotion, trim). Stores its dirty bit
  // in *dirty if non-null. Returns false, changing nothing, if the block is not resident.
  bool Remove(const BlockKey& key, bool* dirty);

  // Returns the tier that holds `key`, or kNone if it is not resident (ghosts are not resident).
  Tier Where(const BlockKey& key) const;
  bool Resident(const BlockKey& key) const { return Where(key) != Tier::kNone; }
  // Clears the dirty bit of a resident block. Returns false if it is not resident.
  bool MarkClean(const BlockKey& key);

  size_t capacity() const { return capacity_; }
  size_t top_capacity() const { return top_capacity_; }
  size_t resident() const { return ListSize(kT1Top) + ListSize(kT1Bot) + T2Size(); }
  size_t top_size() const { return ListSize(kT1Top) + ListSize(kT2Top); }
  size_t bottom_size() const { return ListSize(kT1Bot) + ListSize(kT2Bot); }
  size_t dirty_count() const { return dirty_resident_; }
  size_t ListSize(List l) const { return lists_[l].size; }
  double p() const { return p_; }
  // Returns the bytes of the node pool and index (capacity, not just the used part).
  size_t MetadataBytes() const;

  // Appends the keys of list `l`, MRU first, to *out.
  void ListForTest(List l, std::vector<BlockKey>* out) const;
  // Returns false if an invariant listed at the top of this file is broken.
  bool CheckInvariantsForTest() const;

 private:
  static constexpr uint32_t kNil = UINT32_MAX;

  struct Node {
    BlockKey key;
    uint32_t prev = kNil;  // towards MRU
    uint32_t next = kNil;  // towards LRU
    uint8_t list = kNumLists;
    bool dirty = false;
  };
  struct ListHead {
    uint32_t head = kNil;  // MRU
    uint32_t tail = kNil;  // LRU
    uint32_t size = 0;
  };

  static bool IsTop(uint8_t l) { return l == kT1Top || l == kT2Top; }
  static bool IsResident(uint8_t l) { return l <= kT2Bot; }

  size_t T1Size() const { return ListSize(kT1Top) + ListSize(kT1Bot); }
  size_t T2Size() const { return ListSize(kT2Top) + ListSize(kT2Bot); }
  Tier TierOf(uint8_t l) const { return IsTop(l) ? top_tier_ : bottom_tier_; }

  uint32_t AllocNode(const BlockKey& key, bool dirty);
  void FreeNode(uint32_t idx);
  void Unlink(uint32_t idx);
  void PushFront(List l, uint32_t idx);
  // Drops the LRU ghost of `l` (B1 or B2) from the directory.
  void DropGhostLru(List l);
  // Removes the LRU block of T1 (`from_t1`) or T2 from the cache: into B1/B2 when `to_ghost`,
  // else out of the directory. Reports it in *r.
  void EvictLru(bool from_t1, bool to_ghost, Result* r);
  // ARC case I for the resident node `idx`.
  void HitResident(uint32_t idx, bool dirty, Result* r);
  // ARC's REPLACE(x, p), run only when the cache is full (see tier_arc.cc).
  void ReplaceIfFull(bool x_in_b2, Result* r);
  // Demotes one block from the top tier if it is over top_capacity.
  void BalanceTop(bool inserted_into_t1, Result* r);

  const size_t capacity_;
  const size_t top_capacity_;
  const Tier top_tier_;
  const Tier bottom_tier_;
  double p_ = 0;  // target size of T1 (ARC's p)
  size_t dirty_resident_ = 0;
  std::array<ListHead, kNumLists> lists_{};
  std::vector<Node> nodes_;
  uint32_t free_head_ = kNil;  // free nodes chained through Node::next
  absl::flat_hash_map<BlockKey, uint32_t> index_;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_TIER_ARC_H_
