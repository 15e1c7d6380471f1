// CflruOrder: Clean-First LRU (Park et al., CASES 2006; cited by paper 002 §II-B and paper 004
// §II as CFLRU). The LRU list is split into a working region and a clean-first region of `window`
// blocks at the LRU end. The victim is the least recently used *clean* block in the clean-first
// region; only when that region holds no clean block is the LRU tail (dirty) evicted, which costs a
// write home. Candidates() therefore yields: the clean blocks of the window in LRU order, then the
// remaining blocks from the tail in LRU order (dirty ones of the window, then beyond it).
//
// Thread-safety: not thread-safe; driven by one CacheDriver.
#ifndef RINGCACHE_CACHENODE_POLICY_CFLRU_H_
#define RINGCACHE_CACHENODE_POLICY_CFLRU_H_

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "cachenode/policy/lru.h"

namespace ringcache::policy {

struct CflruConfig {
  size_t window = 0;  // blocks in the clean-first region; 0 = capacity / 8 (see README)
  absl::Status Validate() const { return absl::OkStatus(); }
};

class CflruOrder final : public LruOrder {
 public:
  // `slots` is not owned. REQUIRES: window >= 1.
  CflruOrder(SlotTable* slots, size_t window) : LruOrder(slots), window_(window) {}

  std::string_view name() const override { return "cflru"; }
  size_t Candidates(absl::Span<SlotId> out) override;
  size_t window() const { return window_; }

 private:
  size_t window_;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_CFLRU_H_
