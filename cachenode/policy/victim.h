// VictimChooser: picks which of an Order's eviction candidates leaves the cache. The driver asks
// the queue's Order for window() candidates (tail first) and evicts the one chosen.
//
// Thread-safety: not thread-safe; driven by one CacheDriver.
#ifndef RINGCACHE_CACHENODE_POLICY_VICTIM_H_
#define RINGCACHE_CACHENODE_POLICY_VICTIM_H_

#include <cstddef>
#include <string_view>

#include "absl/types/span.h"
#include "cachenode/policy/slot_table.h"

namespace ringcache::policy {

class VictimChooser {
 public:
  virtual ~VictimChooser() = default;
  virtual std::string_view name() const = 0;
  // Returns how many candidates Choose wants to see (>= 1).
  virtual size_t window() const = 0;
  // Returns the index in `candidates` (best victim of the order first) of the block to evict.
  // REQUIRES: !candidates.empty().
  virtual size_t Choose(absl::Span<const SlotId> candidates, const SlotTable& slots) = 0;
  // Returns true if Choose over `prefix` (the first candidates of the window) already gives the
  // answer Choose would give over the whole window, so the driver need not list the rest.
  // Default: false.
  virtual bool DecidedBy(absl::Span<const SlotId> prefix, const SlotTable& slots) const {
    (void)prefix;
    (void)slots;
    return false;
  }
};

// Evicts the order's own victim (the first candidate).
class TailVictim final : public VictimChooser {
 public:
  std::string_view name() const override { return "tail"; }
  size_t window() const override { return 1; }
  size_t Choose(absl::Span<const SlotId> candidates, const SlotTable& slots) override {
    (void)candidates;
    (void)slots;
    return 0;
  }
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_VICTIM_H_
