// TierArc implementation: ARC (Megiddo & Modha, FAST'03, Fig. 4) over intrusive lists in a node
// pool, with each resident list split into a top (upper tier) and a bottom (lower tier) segment.
// See tier_arc.h for the invariants. Not thread-safe.
#include "cachenode/policy/tier_arc.h"

#include <algorithm>
#include <cassert>

namespace ringcache::policy {

TierArc::TierArc(size_t capacity, size_t top_capacity, Tier top_tier, Tier bottom_tier)
    : capacity_(capacity),
      top_capacity_(std::min(top_capacity, capacity)),
      top_tier_(top_tier),
      bottom_tier_(bottom_tier) {
  assert(capacity >= 1 && capacity <= (size_t{1} << 31) - 1);
  // Reserve a modest prefix; the pool and index grow to 2c entries during warm-up and are then
  // reused (nodes via the free list, map slots in place).
  const size_t reserve = std::min<size_t>(2 * capacity, size_t{1} << 16);
  nodes_.reserve(reserve);
  index_.reserve(reserve);
}

uint32_t TierArc::AllocNode(const BlockKey& key, bool dirty) {
  uint32_t idx;
  if (free_head_ != kNil) {
    idx = free_head_;
    free_head_ = nodes_[idx].next;
  } else {
    idx = static_cast<uint32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  Node& n = nodes_[idx];
  n.key = key;
  n.prev = n.next = kNil;
  n.list = kNumLists;
  n.dirty = dirty;
  return idx;
}

void TierArc::FreeNode(uint32_t idx) {
  Node& n = nodes_[idx];
  n.list = kNumLists;
  n.prev = kNil;
  n.next = free_head_;
  free_head_ = idx;
}

void TierArc::Unlink(uint32_t idx) {
  Node& n = nodes_[idx];
  ListHead& h = lists_[n.list];
  if (n.prev != kNil)
    nodes_[n.prev].next = n.next;
  else
    h.head = n.next;
  if (n.next != kNil)
    nodes_[n.next].prev = n.prev;
  else
    h.tail = n.prev;
  --h.size;
  if (IsResident(n.list) && n.dirty) --dirty_resident_;
  n.prev = n.next = kNil;
  n.list = kNumLists;
}

void TierArc::PushFront(List l, uint32_t idx) {
  Node& n = nodes_[idx];
  ListHead& h = lists_[l];
  n.list = l;
  n.prev = kNil;
  n.next = h.head;
  if (h.head != kNil)
    nodes_[h.head].prev = idx;
  else
    h.tail = idx;
  h.head = idx;
  ++h.size;
  if (IsResident(l) && n.dirty) ++dirty_resident_;
}

void TierArc::DropGhostLru(List l) {
  const uint32_t idx = lists_[l].tail;
  if (idx == kNil) return;
  Unlink(idx);
  index_.erase(nodes_[idx].key);
  FreeNode(idx);
}

void TierArc::EvictLru(bool from_t1, bool to_ghost, Result* r) {
  // The LRU end of T1 (T2) is the tail of its bottom segment, or of its top segment when the
  // list has no bottom part (paper 001 §III-A2: "the lists might or might not have a bottom half
  // in the SSD").
  const List bot = from_t1 ? kT1Bot : kT2Bot;
  const List top = from_t1 ? kT1Top : kT2Top;
  const List src = lists_[bot].size > 0 ? bot : top;
  const uint32_t idx = lists_[src].tail;
  assert(idx != kNil);
  Node& n = nodes_[idx];
  r->evicted = true;
  r->victim.key = n.key;
  r->victim.dirty = n.dirty;
  r->victim.from = TierOf(src);
  Unlink(idx);
  if (to_ghost) {
    n.dirty = false;  // a ghost holds no data
    PushFront(from_t1 ? kB1 : kB2, idx);
  } else {
    index_.erase(n.key);
    FreeNode(idx);
  }
}

// ARC's REPLACE(x_t, p) (Fig. 4): evict the LRU of T1 into B1 if T1 is non-empty and either
// |T1| > p, or x_t is in B2 and |T1| == p; otherwise the LRU of T2 into B2.
// Choice: ARC calls REPLACE whenever its directory is full, which implies a full cache as long
// as blocks only leave by replacement. Because Remove()/Erase() can open holes, we replace only
// when the cache actually is full; without Remove() this is exactly ARC.
void TierArc::ReplaceIfFull(bool x_in_b2, Result* r) {
  if (T1Size() + T2Size() < capacity_) return;
  const double t1 = static_cast<double>(T1Size());
  bool from_t1 = T1Size() >= 1 && ((x_in_b2 && t1 == p_) || t1 > p_);
  if (!from_t1 && T2Size() == 0) from_t1 = true;  // defensive; unreachable under invariant 1
  EvictLru(from_t1, /*to_ghost=*/true, r);
}

// Demotion rule for a split list (our choice; paper 001 §III-A2 says only that "RAM contains the
// top halves of the T1 and T2 lists, SSD the bottom halves"). When the top tier overflows by one
// block, compare the relative depth of the last top block of each list, (|Xtop| - 1) / |X|, and
// demote the deeper one to the head of its bottom segment. This keeps the same fraction of each
// list in the top tier — exactly the "top halves" of T1 and T2 when R == S and the cache is full.
// On a tie, demote from the list that did not just receive the accessed block, so a block that
// was just promoted or inserted is not sent straight back down.
void TierArc::BalanceTop(bool inserted_into_t1, Result* r) {
  if (top_size() <= top_capacity_) return;
  const uint64_t a1 = ListSize(kT1Top), a2 = ListSize(kT2Top);
  const uint64_t n1 = T1Size(), n2 = T2Size();
  bool from_t1;
  if (a1 == 0) {
    from_t1 = false;
  } else if (a2 == 0) {
    from_t1 = true;
  } else {
    const uint64_t d1 = (a1 - 1) * n2;  // depth of T1top's tail, scaled by |T1|·|T2|
    const uint64_t d2 = (a2 - 1) * n1;
    from_t1 = d1 != d2 ? d1 > d2 : !inserted_into_t1;
  }
  const List top = from_t1 ? kT1Top : kT2Top;
  const uint32_t idx = lists_[top].tail;
  Unlink(idx);
  PushFront(from_t1 ? kT1Bot : kT2Bot, idx);
  r->demoted = true;
  r->demoted_key = nodes_[idx].key;
}

// Case I: hit in T1 or T2 -> MRU of T2 (in the top tier).
void TierArc::HitResident(uint32_t idx, bool dirty, Result* r) {
  r->found = TierOf(nodes_[idx].list);
  Unlink(idx);
  nodes_[idx].dirty |= dirty;
  PushFront(kT2Top, idx);
  BalanceTop(/*inserted_into_t1=*/false, r);
}

bool TierArc::RequestIfResident(const BlockKey& key, bool dirty, Result* r) {
  auto it = index_.find(key);
  if (it == index_.end() || !IsResident(nodes_[it->second].list)) return false;
  r->Reset();
  HitResident(it->second, dirty, r);
  return true;
}

void TierArc::Request(const BlockKey& key, bool dirty, Result* r) {
  r->Reset();
  const size_t c = capacity_;
  auto it = index_.find(key);
  if (it != index_.end()) {
    const uint32_t idx = it->second;
    const uint8_t l = nodes_[idx].list;
    if (IsResident(l)) {
      HitResident(idx, dirty, r);
      return;
    }
    r->ghost_hit = true;
    const double b1 = static_cast<double>(ListSize(kB1));
    const double b2 = static_cast<double>(ListSize(kB2));
    if (l == kB1) {
      // Case II: p = min(p + δ1, c), δ1 = max(|B2| / |B1|, 1).
      p_ = std::min(p_ + std::max(b2 / b1, 1.0), static_cast<double>(c));
      ReplaceIfFull(/*x_in_b2=*/false, r);
    } else {
      // Case III: p = max(p - δ2, 0), δ2 = max(|B1| / |B2|, 1).
      p_ = std::max(p_ - std::max(b1 / b2, 1.0), 0.0);
      ReplaceIfFull(/*x_in_b2=*/true, r);
    }
    Unlink(idx);
    nodes_[idx].dirty = dirty;
    PushFront(kT2Top, idx);
    BalanceTop(/*inserted_into_t1=*/false, r);
    return;
  }

  // Case IV: not in the directory.
  if (T1Size() + ListSize(kB1) == c) {
    if (T1Size() < c) {  // IV-A, B1 non-empty
      DropGhostLru(kB1);
      ReplaceIfFull(/*x_in_b2=*/false, r);
    } else {  // IV-A, B1 empty: drop the LRU of T1 outright (no ghost)
      EvictLru(/*from_t1=*/true, /*to_ghost=*/false, r);
    }
  } else {  // IV-B: |T1| + |B1| < c
    const size_t total = T1Size() + T2Size() + ListSize(kB1) + ListSize(kB2);
    if (total >= c) {
      if (total == 2 * c) DropGhostLru(kB2);
      ReplaceIfFull(/*x_in_b2=*/false, r);
    }
  }
  const uint32_t idx = AllocNode(key, dirty);
  index_.emplace(key, idx);
  PushFront(kT1Top, idx);
  BalanceTop(/*inserted_into_t1=*/true, r);
}

bool TierArc::Remove(const BlockKey& key, bool* dirty) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  const uint32_t idx = it->second;
  if (!IsResident(nodes_[idx].list)) return false;
  if (dirty != nullptr) *dirty = nodes_[idx].dirty;
  Unlink(idx);
  index_.erase(it);
  FreeNode(idx);
  return true;
}

Tier TierArc::Where(const BlockKey& key) const {
  auto it = index_.find(key);
  if (it == index_.end()) return Tier::kNone;
  const uint8_t l = nodes_[it->second].list;
  return IsResident(l) ? TierOf(l) : Tier::kNone;
}

bool TierArc::MarkClean(const BlockKey& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  Node& n = nodes_[it->second];
  if (!IsResident(n.list)) return false;
  if (n.dirty) {
    n.dirty = false;
    --dirty_resident_;
  }
  return true;
}

size_t TierArc::MetadataBytes() const {
  // flat_hash_map: one slot (key + node index) and one control byte per bucket.
  const size_t slot = sizeof(std::pair<const BlockKey, uint32_t>) + 1;
  return sizeof(*this) + nodes_.capacity() * sizeof(Node) + index_.capacity() * slot;
}

void TierArc::ListForTest(List l, std::vector<BlockKey>* out) const {
  for (uint32_t i = lists_[l].head; i != kNil; i = nodes_[i].next) out->push_back(nodes_[i].key);
}

bool TierArc::CheckInvariantsForTest() const {
  const size_t c = capacity_;
  if (T1Size() + T2Size() > c) return false;
  if (T1Size() + ListSize(kB1) > c) return false;
  if (T1Size() + T2Size() + ListSize(kB1) + ListSize(kB2) > 2 * c) return false;
  if (top_size() > top_capacity_) return false;
  if (p_ < 0 || p_ > static_cast<double>(c)) return false;
  size_t dirty = 0, entries = 0;
  for (int l = 0; l < kNumLists; ++l) {
    size_t n = 0;
    uint32_t prev = kNil;
    for (uint32_t i = lists_[l].head; i != kNil; i = nodes_[i].next) {
      const Node& node = nodes_[i];
      if (node.list != l || node.prev != prev) return false;
      auto it = index_.find(node.key);
      if (it == index_.end() || it->second != i) return false;
      if (IsResident(l) && node.dirty) ++dirty;
      if (!IsResident(l) && node.dirty) return false;
      prev = i;
      ++n;
    }
    if (n != lists_[l].size || lists_[l].tail != prev) return false;
    entries += n;
  }
  return entries == index_.size() && dirty == dirty_resident_;
}

}  // namespace ringcache::policy
