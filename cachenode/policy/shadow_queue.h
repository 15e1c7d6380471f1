// ShadowQueue: the order in which an exclusive RAM tier gives up shadow slots under slot
// pressure (placement.h "NAME(exclusive)"): a FIFO of the blocks that became shadows (clean,
// in RAM, with an SSD slot), oldest first. Entries may go stale (the block was written, demoted
// or evicted since): the caller's `is_shadow` says which still are, and stale ones are skipped
// when popped and dropped when the queue outgrows the blocks cached. The cache node's BlockMap
// and the simulator's NodeTiers both use it, so both free the same slots in the same order.
//
// Thread-safety: none; the owner serialises calls.
#ifndef RINGCACHE_CACHENODE_POLICY_SHADOW_QUEUE_H_
#define RINGCACHE_CACHENODE_POLICY_SHADOW_QUEUE_H_

#include <cstddef>
#include <deque>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "cachenode/policy/types.h"

namespace ringcache::policy {

class ShadowQueue {
 public:
  // Appends `key`, which just became a shadow; `cached` is the number of blocks cached now.
  template <typename IsShadow>
  void Push(const BlockKey& key, size_t cached, const IsShadow& is_shadow) {
    keys_.push_back(key);
    if (keys_.size() <= 2 * cached + 1024) return;
    std::deque<BlockKey> live;
    absl::flat_hash_set<BlockKey> seen;
    for (const BlockKey& k : keys_) {
      if (is_shadow(k) && seen.insert(k).second) live.push_back(k);
    }
    keys_.swap(live);
  }
  // Removes and returns the oldest key that is still a shadow; nullopt if none is.
  template <typename IsShadow>
  std::optional<BlockKey> PopOldest(const IsShadow& is_shadow) {
    while (!keys_.empty()) {
      const BlockKey k = keys_.front();
      keys_.pop_front();
      if (is_shadow(k)) return k;
    }
    return std::nullopt;
  }
  size_t size() const { return keys_.size(); }

 private:
  std::deque<BlockKey> keys_;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_SHADOW_QUEUE_H_
