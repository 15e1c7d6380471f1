// LruOrder: least-recently-used order over the shared SlotTable. A hit moves the block to the
// head; candidates are the tail (least recently used) first. Base of FifoOrder and CflruOrder.
//
// Thread-safety: not thread-safe; driven by one CacheDriver.
#ifndef RINGCACHE_CACHENODE_POLICY_LRU_H_
#define RINGCACHE_CACHENODE_POLICY_LRU_H_

#include <cstddef>
#include <string_view>

#include "cachenode/policy/order.h"

namespace ringcache::policy {

class LruOrder : public Order {
 public:
  // `slots` is not owned and must outlive the order.
  explicit LruOrder(SlotTable* slots) : slots_(slots) {}

  std::string_view name() const override { return "lru"; }
  void Insert(SlotId slot) override { list_.PushFront(slots_->links(), slot); }
  void Touch(SlotId slot) override { list_.MoveToFront(slots_->links(), slot); }
  void Remove(SlotId slot, bool evicted) override;
  size_t Candidates(absl::Span<SlotId> out) override;
  size_t size() const override { return list_.size; }
  size_t MetadataBytes() const override { return sizeof(*this); }

 protected:
  SlotTable* slots_;
  SlotList list_;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_LRU_H_
