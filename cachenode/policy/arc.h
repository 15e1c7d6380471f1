// ArcOrder: Adaptive Replacement Cache (Megiddo & Modha, FAST 2003) as a queue order.
//
// Resident lists T1 (seen once recently) and T2 (seen at least twice), ghost lists B1 and B2
// (keys only), and the adaptive target p for |T1|. Cases of the paper's ARC(c):
//   I   hit in T1 or T2           -> move to the MRU end of T2                       (Touch)
//   II  miss, key in B1           -> p = min(c, p + max(|B2|/|B1|, 1)); insert in T2 (OnMiss, Insert)
//   III miss, key in B2           -> p = max(0, p - max(|B1|/|B2|, 1)); insert in T2 (OnMiss, Insert)
//   IV  miss, key in no list      -> insert in T1                                    (Insert)
// REPLACE(x, p) becomes the candidate order: the LRU end of T1 first when |T1| >= 1 and
// (|T1| > p or (x in B2 and |T1| == p)), else the LRU end of T2; an evicted T1 block goes to the
// MRU end of B1, a T2 block to B2. The driver evicts only when it needs room, so the ghost-list
// trimming of case IV (delete the LRU of B1 when |T1| + |B1| = c, of B2 when the total is 2c) is
// done after the insertion by restoring |T1| + |B1| <= c and |T1|+|T2|+|B1|+|B2| <= 2c, which
// drops the same entries.
//
// aux bit 0 of a slot says T2. Thread-safety: not thread-safe; driven by one CacheDriver.
#ifndef RINGCACHE_CACHENODE_POLICY_ARC_H_
#define RINGCACHE_CACHENODE_POLICY_ARC_H_

#include <cstddef>
#include <string_view>

#include "cachenode/policy/key_lru.h"
#include "cachenode/policy/order.h"

namespace ringcache::policy {

class ArcOrder final : public Order {
 public:
  // `slots` is not owned. `c` is the cache size ARC adapts against. REQUIRES: c >= 1.
  ArcOrder(SlotTable* slots, size_t c);

  std::string_view name() const override { return "arc"; }
  void OnMiss(const BlockKey& key) override;
  void Insert(SlotId slot) override;
  void Touch(SlotId slot) override;
  void Remove(SlotId slot, bool evicted) override;
  size_t Candidates(absl::Span<SlotId> out) override;
  size_t size() const override { return t1_.size + t2_.size; }
  size_t MetadataBytes() const override;

  // Introspection for tests and metrics.
  double p() const { return p_; }
  size_t t1_size() const { return t1_.size; }
  size_t t2_size() const { return t2_.size; }
  size_t b1_size() const { return b1_.size(); }
  size_t b2_size() const { return b2_.size(); }

 private:
  enum class Pending { kNew, kFromB1, kFromB2 };
  static constexpr uint8_t kT2 = 1;

  void TrimGhosts();

  SlotTable* slots_;
  double c_;
  double p_ = 0;
  SlotList t1_, t2_;
  KeyLru b1_, b2_;
  Pending pending_ = Pending::kNew;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_ARC_H_
