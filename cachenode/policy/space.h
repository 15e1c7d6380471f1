// Space: how the cache's blocks are shared among queues, and which queue gives up a block when room
// is needed. GlobalSpace keeps one queue for every VDI; VbqSpace (vbq.h) keeps one queue per VDI
// with the bounds of paper 002.
//
// Protocol, as the CacheDriver calls it:
//   q = OnAccess(vdi)                                   every access
//   if NeedsReclaim(used):                              before inserting a missed block
//     BeginReclaim(used)
//     while ((q = NextReclaimQueue(used)) != kNoQueue) evict one block of queue q
//     if the cache is still full: evict one block of FallbackQueue()
//
// Thread-safety: not thread-safe; driven by one CacheDriver.
#ifndef RINGCACHE_CACHENODE_POLICY_SPACE_H_
#define RINGCACHE_CACHENODE_POLICY_SPACE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "cachenode/policy/order.h"
#include "cachenode/policy/types.h"

namespace ringcache::policy {

inline constexpr uint32_t kNoQueue = 0xffffffffu;

class Space {
 public:
  virtual ~Space() = default;

  virtual std::string_view name() const = 0;
  // Returns the queue of `vdi`, creating it on first use, and counts one access to it.
  virtual uint32_t OnAccess(uint32_t vdi) = 0;
  // Returns the queue of `vdi`, or kNoQueue if it has none. Counts nothing.
  virtual uint32_t QueueOf(uint32_t vdi) const = 0;
  // Returns queue `q`. REQUIRES: q was returned by OnAccess.
  virtual Order& queue(uint32_t q) = 0;
  // The queues there are: 0 .. queue_count() - 1 (some may be empty).
  virtual size_t queue_count() const = 0;
  // Reports a miss of `key` in queue `q` (every miss: admitted, rejected or bypassed alike), and
  // a block the driver evicted from queue `q`. Spaces that size queues by ghost hits use them.
  // OnMiss returns true if the queue evicted `key` recently (a ghost hit): the block has shown
  // reuse, so the driver admits a read miss of it without asking the admission filter.
  // Default: nothing, false.
  virtual bool OnMiss(uint32_t q, const BlockKey& key) {
    (void)q;
    (void)key;
    return false;
  }
  virtual void OnEvicted(uint32_t q, const BlockKey& key) {
    (void)q;
    (void)key;
  }

  // Returns whether room must be reclaimed before one more block is inserted into a cache that
  // holds `used` blocks.
  virtual bool NeedsReclaim(size_t used) const = 0;
  // Starts a reclaim round (fixes the per-queue targets for the round).
  virtual void BeginReclaim(size_t used) = 0;
  // Returns the queue to take the next block from in this round, or kNoQueue when it is over.
  virtual uint32_t NextReclaimQueue(size_t used) = 0;
  // Returns a non-empty queue to evict from when the cache is full after a round, or kNoQueue if
  // every queue is empty.
  virtual uint32_t FallbackQueue() const = 0;
  // Returns a non-empty queue to shed one block from when the cache must shrink below its
  // capacity (CachePolicy::Shed), or kNoQueue if every queue is empty. Default: FallbackQueue().
  virtual uint32_t ShedQueue() const { return FallbackQueue(); }

  // Returns the VDI whose queue `q` is, or kNoVdi if queues are not per VDI.
  static constexpr uint32_t kNoVdi = 0xffffffffu;
  virtual uint32_t QueueVdi(uint32_t q) const {
    (void)q;
    return kNoVdi;
  }
  // Gives `vdi`'s queue a new order from `make` (null: the space's own factory), moving its
  // blocks over in eviction order (the old tail stays the tail). Default: FailedPrecondition,
  // a space without per-VDI queues cannot.
  virtual absl::Status ReplaceOrder(uint32_t vdi, const OrderFactory* make) {
    (void)vdi;
    (void)make;
    return absl::FailedPreconditionError(
        "per-VDI orders need per-VDI queues: the node policy has no 'vbq' space");
  }

  // Gives `vdi` a share of the cache: its queue keeps at least `min` of the capacity (reclaim
  // rounds and fallbacks take other queues first) and holds at most `max` (an insertion into a
  // queue at its maximum evicts from that queue first). 0 and 1: no share. Default:
  // FailedPrecondition, a space without per-VDI queues cannot.
  virtual absl::Status SetShare(uint32_t vdi, double min, double max) {
    (void)vdi;
    (void)min;
    (void)max;
    return absl::FailedPreconditionError(
        "a share of the cache per VDI needs per-VDI queues: the node policy has no 'vbq' space");
  }
  // Whether queue `q` holds its maximum share already (SetShare). Default: never.
  virtual bool AtMaxShare(uint32_t q) const {
    (void)q;
    return false;
  }

  // Appends one row per VDI queue (see VdiStats). Default: nothing.
  virtual void AppendVdiStats(std::vector<VdiStats>* out) const { (void)out; }
  // Returns the bytes of metadata held by the space and its orders (not the SlotTable).
  virtual size_t MetadataBytes() const = 0;
};

// One queue for the whole cache: a block is evicted only when the cache is full.
class GlobalSpace final : public Space {
 public:
  // `slots` is not owned. REQUIRES: capacity == slots->capacity().
  GlobalSpace(size_t capacity, SlotTable* slots, const OrderFactory& make_order)
      : capacity_(capacity), order_(make_order(slots, capacity)) {}

  std::string_view name() const override { return "global"; }
  uint32_t OnAccess(uint32_t vdi) override {
    (void)vdi;
    return 0;
  }
  uint32_t QueueOf(uint32_t vdi) const override {
    (void)vdi;
    return 0;
  }
  Order& queue(uint32_t q) override {
    (void)q;
    return *order_;
  }
  size_t queue_count() const override { return 1; }
  bool NeedsReclaim(size_t used) const override { return used >= capacity_; }
  void BeginReclaim(size_t used) override { (void)used; }
  uint32_t NextReclaimQueue(size_t used) override { return used >= capacity_ ? 0 : kNoQueue; }
  uint32_t FallbackQueue() const override { return order_->size() > 0 ? 0 : kNoQueue; }
  size_t MetadataBytes() const override { return sizeof(*this) + order_->MetadataBytes(); }

 private:
  size_t capacity_;
  std::unique_ptr<Order> order_;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_SPACE_H_
