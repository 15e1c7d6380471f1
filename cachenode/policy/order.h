// Order: the ordering of the blocks inside one cache queue (LRU, FIFO, ARC, S3-FIFO, CFLRU).
//
// An Order links the SlotTable's slots of its queue into intrusive lists (it owns the list headers;
// the links live in the shared SlotTable, so a thousand per-VDI queues cost a few bytes each).
// It never evicts by itself: the CacheDriver asks it for eviction candidates, lets a victim chooser
// (LCR) or a replacement rule (RPAC) pick one, and then removes it. Candidates come from the tail,
// best victim first, so a chooser can look at a window of W blocks.
//
// Protocol for one access, as the driver calls it:
//   hit:   Touch(slot)
//   miss:  OnMiss(key) -> [Candidates(...) -> Remove(victim, /*evicted=*/true)]* -> Insert(slot)
//   trim:  Remove(slot, /*evicted=*/false)
// OnMiss lets orders with ghost lists (ARC, S3-FIFO) look the key up before the eviction that the
// same miss may cause (ARC's REPLACE depends on whether the key is in B2).
//
// Thread-safety: not thread-safe; driven by one CacheDriver.
#ifndef RINGCACHE_CACHENODE_POLICY_ORDER_H_
#define RINGCACHE_CACHENODE_POLICY_ORDER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>

#include "absl/types/span.h"
#include "cachenode/policy/slot_table.h"
#include "cachenode/policy/types.h"

namespace ringcache::policy {

class Order {
 public:
  virtual ~Order() = default;

  virtual std::string_view name() const = 0;

  // Notes that `key` missed and may be inserted next. Default: nothing.
  virtual void OnMiss(const BlockKey& key) { (void)key; }
  // Adds a newly cached block. REQUIRES: `slot` is used in the SlotTable and on no list.
  virtual void Insert(SlotId slot) = 0;
  // Records a hit on a cached block of this queue.
  virtual void Touch(SlotId slot) = 0;
  // Removes a block of this queue. `evicted` is true for an eviction (the order may remember the
  // key in a ghost list) and false for a trim or invalidation (forgotten).
  virtual void Remove(SlotId slot, bool evicted) = 0;
  // Writes up to out.size() eviction candidates into `out`, best victim first, and returns how
  // many. May reorganise internal state (S3-FIFO promotions, second chances) but never drops a
  // cached block. Returns 0 only when the queue is empty.
  virtual size_t Candidates(absl::Span<SlotId> out) = 0;

  // Returns the number of blocks in this queue.
  virtual size_t size() const = 0;
  // Returns the bytes this order holds beyond the shared SlotTable (ghosts, headers).
  virtual size_t MetadataBytes() const = 0;
};

// Makes one Order over `slots` (not owned; must outlive the order). `capacity` is the number of
// blocks of the whole cache, which ARC and S3-FIFO use to bound their ghost lists.
using OrderFactory = std::function<std::unique_ptr<Order>(SlotTable* slots, size_t capacity)>;

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_ORDER_H_
