// RAM+SSD two-level caches built from ARC, after paper 001 §III-A2 (Appuswamy et al., "Cache,
// cache everywhere, flushing all hits down the sink", Fig. 1):
//   - IARC (inclusive): independent RAM ARC and SSD ARC; a read miss allocates in both levels.
//   - GARC (global exclusive): independent RAM ARC and SSD ARC; a block enters the SSD only when
//     the RAM ARC evicts it (demotion) and leaves the SSD when a RAM miss finds it there.
//   - UARC (unified exclusive): one ARC over R+S blocks; RAM holds the MRU part of T1 and T2, the
//     SSD the LRU part; a RAM overflow demotes to SSD; a block lives in one tier only.
// The exact rules, and the choices made where the paper is silent, are in README_tiering.md and
// next to the code in tiering.cc.
//
// Each cache is a complete CachePolicy (types.h): it admits every miss (no admission filter),
// tracks dirty state (a write makes the block dirty; a dirty block that leaves the cache is
// reported in Outcome::evicted with dirty = true), and counts SSD writes (fills, and RAM->SSD
// demotions) and promotions (SSD->RAM moves on a read).
//
// Thread-safety: none. Policy objects are driven by one thread at a time (types.h).
#ifndef RINGCACHE_CACHENODE_POLICY_TIERING_H_
#define RINGCACHE_CACHENODE_POLICY_TIERING_H_

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "cachenode/policy/types.h"

namespace ringcache::policy {

struct TierConfig {
  // Largest supported R + S (node indices are 32-bit and the ghost directory holds 2(R+S)).
  static constexpr size_t kMaxBlocks = (size_t{1} << 31) - 1;

  size_t ram_blocks = 0;  // R: blocks the RAM tier holds
  size_t ssd_blocks = 0;  // S: blocks the SSD tier holds

  // Returns InvalidArgument, naming the field, unless 1 <= R, 1 <= S and R + S <= kMaxBlocks.
  absl::Status Validate() const;
};

// The three organisations of paper 001 §III-A2.
enum class TierScheme { kInclusive, kGlobal, kUnified };

// A two-tier cache; adds per-tier inspection to CachePolicy.
class TieredCache : public CachePolicy {
 public:
  // Reports whether `tier` (kRam or kSsd) holds a copy of `key`. Under IARC a block may have a
  // copy in each tier; under GARC and UARC at most one of the two is true.
  virtual bool Holds(const BlockKey& key, Tier tier) const = 0;
  virtual size_t ram_size() const = 0;  // blocks resident in RAM
  virtual size_t ssd_size() const = 0;  // blocks resident on SSD
  virtual TierScheme scheme() const = 0;
  // Returns false if an internal invariant is broken (exclusivity for GARC/UARC, list sizes).
  virtual bool CheckInvariantsForTest() const = 0;
};

// Returns a two-tier cache of `scheme`, or nullptr if `config` fails Validate().
std::unique_ptr<TieredCache> MakeTieredCache(TierScheme scheme, const TierConfig& config);

// The factories the policy registry uses. REQUIRES: config.Validate().ok(); they return nullptr
// otherwise. name() is "iarc", "garc" and "uarc" respectively.
std::unique_ptr<CachePolicy> MakeIarc(const TierConfig& config);  // paper 001 §III-A2, Fig. 1a
std::unique_ptr<CachePolicy> MakeGarc(const TierConfig& config);  // paper 001 §III-A2, Fig. 1b
std::unique_ptr<CachePolicy> MakeUarc(const TierConfig& config);  // paper 001 §III-A2, Fig. 1c

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_TIERING_H_
