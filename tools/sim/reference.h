// Independent reference computations the golden tests check the policy engine against. They
// share no code with cachenode/policy/: LRU by Mattson stack distance, FIFO by a plain queue, OPT
// by exhaustive search on tiny traces and by a direct Belady scan on larger ones.
//
// All functions count a hit on any access (read or write) to a cached block, and treat every
// access as demanding the block (write-back: writes are cached like reads).
//
// Thread-safety: pure functions.
#ifndef RINGCACHE_TOOLS_SIM_REFERENCE_H_
#define RINGCACHE_TOOLS_SIM_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "cachenode/policy/types.h"
#include "tools/sim/trace.h"

namespace ringcache::sim {

// Expands a source into its block accesses (the same splitting the runner does).
absl::StatusOr<std::vector<policy::BlockKey>> ExpandToBlocks(RequestSource& src,
                                                             uint32_t block_size);

// Returns, per access, its LRU stack distance: 1 + the number of distinct other blocks accessed
// since the previous access to the same block; policy::kNever for a first access. An LRU cache of
// C blocks hits exactly the accesses with distance <= C. O(n log n) (Fenwick tree over time).
std::vector<uint64_t> LruStackDistances(const std::vector<policy::BlockKey>& keys);
// The same by walking an explicit stack: O(n * distinct). For cross-checking the fast one.
std::vector<uint64_t> LruStackDistancesNaive(const std::vector<policy::BlockKey>& keys);
// Counts distances <= capacity.
uint64_t LruHitsFromDistances(const std::vector<uint64_t>& distances, uint64_t capacity);

// Hits of a FIFO cache of `capacity` blocks that admits every miss (hits do not reorder).
uint64_t FifoHits(const std::vector<policy::BlockKey>& keys, uint64_t capacity);

// The maximum number of hits any policy can get with `capacity` blocks, by exhaustive search over
// every choice at every miss (insert or not; which block to evict). `allow_bypass` = false forces
// every miss to be inserted (demand paging). REQUIRES: at most 24 distinct blocks; the search is
// memoised on (position, cache contents), so keep traces to a few dozen accesses.
absl::StatusOr<uint64_t> BruteForceOptHits(const std::vector<policy::BlockKey>& keys,
                                           uint64_t capacity, bool allow_bypass);

// Belady's rule by direct scan, O(n * capacity): on a miss with a full cache, evict the cached
// block used farthest in the future (with bypass: skip inserting when the missed block's next use
// is not nearer than every cached block's).
uint64_t BeladyHits(const std::vector<policy::BlockKey>& keys, uint64_t capacity,
                    bool allow_bypass);

}  // namespace ringcache::sim

#endif  // RINGCACHE_TOOLS_SIM_REFERENCE_H_
