// Belady's offline optimal replacement (MIN/OPT), the upper bound that ringcache-sim prints next
// to every online policy. It needs the future: each Access must carry next_use, the seq of the
// next access to the same key (kNever if there is none), which the simulator fills in a
// backward pass over the trace.
//
// Rule (with bypass, the default): on a miss the policy keeps, among the cached blocks plus the
// missed one, the ones whose next use is nearest. So a missed block is
//   - declined if it is never used again, or if the cache is full and its next use is not
//     nearer than that of every cached block (ties go to declining: it saves an SSD write);
//   - otherwise inserted, evicting (when full) the cached block whose next use is farthest
//     (a block never used again first).
// This is optimal for the number of hits over all accesses (reads and writes alike) among all
// policies that may decline to cache a block — the online admission filters (sieve, RPAC, CMF
// bypass) included — so OPT's hit count bounds every policy's on any trace. Classic Belady,
// which must cache every miss, is available with allow_bypass = false; it bounds only policies
// that admit every miss. A declined read is reported as Outcome::rejected, a declined write as
// Outcome::bypassed (written around to the data node).
//
// OPT is one cache level; its hits are reported as Tier::kSsd, every insertion and every write
// hit counts as one SSD write, and dirty blocks that leave are reported as evictions.
//
// Cost: O(log capacity) per access (an indexed binary max-heap on next_use plus a flat hash map);
// no allocation after warm-up. Thread-safety: none (see types.h).
#ifndef RINGCACHE_CACHENODE_POLICY_OPT_H_
#define RINGCACHE_CACHENODE_POLICY_OPT_H_

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "cachenode/policy/types.h"

namespace ringcache::policy {

struct OptConfig {
  size_t capacity_blocks = 0;
  // Decline blocks whose next use is farther than every cached block's (see above).
  bool allow_bypass = true;

  // Returns InvalidArgument unless 1 <= capacity_blocks <= 2^32 - 2.
  absl::Status Validate() const;
};

// Returns offline OPT with bypass (the bound for every online policy). name() is "opt".
// REQUIRES: capacity_blocks >= 1; returns nullptr otherwise.
std::unique_ptr<CachePolicy> MakeBeladyOpt(size_t capacity_blocks);
// Returns OPT as configured, or nullptr if config fails Validate(). name() is "opt" with bypass,
// "opt-nobypass" without.
std::unique_ptr<CachePolicy> MakeBeladyOpt(const OptConfig& config);

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_OPT_H_
