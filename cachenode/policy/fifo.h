// FifoOrder: first-in first-out order. A hit changes nothing; candidates are the oldest insertion
// first. It is the candidate order RPAC scans in paper 000 (Fig. 4: FIFO_FRONT, P.next).
//
// Thread-safety: not thread-safe; driven by one CacheDriver.
#ifndef RINGCACHE_CACHENODE_POLICY_FIFO_H_
#define RINGCACHE_CACHENODE_POLICY_FIFO_H_

#include <string_view>

#include "cachenode/policy/lru.h"

namespace ringcache::policy {

class FifoOrder final : public LruOrder {
 public:
  // `slots` is not owned and must outlive the order.
  explicit FifoOrder(SlotTable* slots) : LruOrder(slots) {}
  std::string_view name() const override { return "fifo"; }
  void Touch(SlotId slot) override;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_FIFO_H_
