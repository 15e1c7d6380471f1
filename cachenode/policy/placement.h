// Placement: which of the blocks a cache holds live in RAM and which on SSD, for a cache node whose
// membership (what is cached at all) is decided by a CachePolicy such as the VBQ driver. Tiers
// are exclusive: a block lives in one tier only; a RAM eviction demotes the block to SSD.
//
// Two placements:
//   - "lru":  RAM holds the most recently used blocks (one LRU list over RAM).
//   - "uarc": after paper 001 §III-A2 UARC — one ARC-style pair of lists over the cached blocks,
//             T1 (seen once since admission) and T2 (seen twice or more); RAM holds the MRU part of
//             both. The RAM share of T1 vs T2 adapts like ARC's target p: a hit on a block demoted
//             from T1 (an SSD hit in T1) grows T1's RAM share, one in T2 grows T2's. Demotion takes
//             the LRU RAM block of the list that is above its share (paper 001 §III-A2, Fig. 1(c)).
// Either may sieve, as paper 001's SE-UARC does (§V, "sieving"): "uarc(sieve=N)" counts each
// block's accesses since it entered the cache, and a block that leaves RAM with no SSD copy is
// worth an SSD slot only if it was accessed more than N times (WorthSsd); the cache node drops
// the others (clean, so nothing is lost) instead of writing them to the SSD.
// Either may be exclusive ("uarc(exclusive)", also "uarc(sieve=N,exclusive)"): see exclusive().
//
// Pure: no I/O, no clock. Thread-safety: none; the cache node serialises calls.
#ifndef RINGCACHE_CACHENODE_POLICY_PLACEMENT_H_
#define RINGCACHE_CACHENODE_POLICY_PLACEMENT_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cachenode/policy/types.h"

namespace ringcache::policy {

class Placement {
 public:
  virtual ~Placement() = default;
  // Reports an access to a cached block (`admitted` = it just entered the cache). Returns the tier
  // the block must live in now and appends to *demote the blocks that must move RAM -> SSD to
  // make room. REQUIRES: the block is cached (the membership policy holds it).
  virtual Tier OnAccess(const BlockKey& key, bool admitted, std::vector<BlockKey>* demote) = 0;
  // Forgets a block that left the cache.
  virtual void OnRemove(const BlockKey& key) = 0;
  // Returns where the block lives (kNone if unknown).
  virtual Tier TierOf(const BlockKey& key) const = 0;
  // SE-UARC's sieve: whether a block leaving RAM without an SSD copy should get one. True without
  // a sieve.
  virtual bool WorthSsd(const BlockKey& key) const {
    (void)key;
    return true;
  }
  // Whether the RAM tier adds capacity ("NAME(exclusive)", paper 001's UARC): the membership
  // policy then holds SSD slots + RAM blocks, and a clean block in RAM keeps no SSD copy (the
  // cache node's rules: cachenode/block_map.h, policy/node_tiers.h). False with no RAM.
  virtual bool exclusive() const { return false; }
  virtual size_t ram_blocks() const = 0;
  virtual size_t ram_capacity() const = 0;
  // Gives the RAM tier `blocks` of room (an online resize: CacheNode::Resize). A smaller tier
  // appends to *demote the blocks that must leave RAM now, least valuable first, as accesses
  // would; a larger one fills as blocks are accessed. REQUIRES: blocks > 0 if the tier had
  // room before, and 0 if it had none (a tier is not added or removed while the node runs).
  virtual void SetRamCapacity(size_t blocks, std::vector<BlockKey>* demote) = 0;
};

// Returns "lru" or "uarc" placement over `ram_blocks` of RAM, optionally with parameters
// "NAME(sieve=N)" (N >= 1), "NAME(exclusive)" or both, comma-separated; ram_blocks == 0 puts
// everything on SSD. Unknown names and bad parameters are
// kInvalidArgument.
absl::StatusOr<std::unique_ptr<Placement>> MakePlacement(const std::string& name,
                                                         size_t ram_blocks);

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_PLACEMENT_H_
