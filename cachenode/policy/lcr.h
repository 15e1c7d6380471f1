// LcrVictim: load-aware victim choice of paper 004 (LCR, docs/papers.md,
// Alg. 1), with the "flash chip" of the paper read as the block's home data node.
//
// The last `window` blocks of the queue form the destaging region (§III-B 2). Alg. 1 walks it from
// the tail: the first clean block found is evicted (no write home); if the region holds no clean
// block, the dirty block whose home data nodes have the least load (LoadView::HomeLoad, an input;
// the paper's L_chip of eq. 2) is evicted, the tail-most one on ties. The paper's block lives on one
// chip; ours has N homes and its destage writes all of them, finishing with the slowest, so the
// load of a block is that of its most loaded home (DataNodePool::HomeLoad, sim DeviceModel). Without a LoadView every load is 0
// and the tail-most dirty block is chosen.
//
// Thread-safety: not thread-safe; driven by one CacheDriver. The LoadView is read, never written.
#ifndef RINGCACHE_CACHENODE_POLICY_LCR_H_
#define RINGCACHE_CACHENODE_POLICY_LCR_H_

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "cachenode/policy/types.h"
#include "cachenode/policy/victim.h"

namespace ringcache::policy {

struct LcrConfig {
  size_t window = 0;  // blocks in the destaging region; 0 = capacity / 64, at most 256 (README)
  absl::Status Validate() const { return absl::OkStatus(); }
};

class LcrVictim final : public VictimChooser {
 public:
  // `load` is not owned, may be null, and must outlive this object. REQUIRES: window >= 1.
  LcrVictim(size_t window, const LoadView* load) : window_(window), load_(load) {}

  std::string_view name() const override { return "lcr"; }
  size_t window() const override { return window_; }
  size_t Choose(absl::Span<const SlotId> candidates, const SlotTable& slots) override;
  // A clean block in the prefix decides: Alg. 1 returns the first clean block from the tail.
  bool DecidedBy(absl::Span<const SlotId> prefix, const SlotTable& slots) const override;

 private:
  size_t window_;
  const LoadView* load_;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_LCR_H_
