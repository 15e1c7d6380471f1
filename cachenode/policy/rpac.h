// RpacAdmission: RPAC, the regional popularity-aware replacement of paper 000 (Ye et al.,
// docs/papers.md), as an admission + replacement veto the CacheDriver
// consults with its eviction candidates.
//
// - Region division (§III-A): a region is `region_blocks` (R) adjacent blocks of one VDI; a hash
//   table maps a region to its entry, and a complete binary tree of depth d under each region holds
//   the popularity of its sub-regions (level l has 2^l sub-regions of R / 2^l blocks).
// - Popularity (§III-B, eq. 1): every access (hit or miss) adds 1 to its region and to the d
//   sub-regions containing the block; every T accesses (C_A mod T = 0) every popularity is
//   multiplied by alpha (0.5). Implemented lazily: each entry records the cycle it was last brought
//   up to date and is decayed by alpha once per elapsed cycle (integer floor, as Fig. 4's Te), so the
//   result equals decaying the whole table at every cycle boundary. Entries that decay to 0 are
//   removed by a round-robin sweep (§III end: "periodically removes the history of accesses [...]
//   in a round robin manner"); a block whose region is unknown has popularity 0.
// - Replacement (§III-C, Fig. 4, ineq. 2): when the cache is full, candidates are scanned in the
//   queue's eviction order (FIFO in the paper); block B replaces candidate A iff Pr_B > c * Pr_A.
//   Different regions compare region popularities; the same region compares the two sub-regions
//   where A and B first part in the tree (same leaf: no replacement). An unknown region (Fig. 4
//   line 17, Index2 < 0) is replaced at once. If no candidate qualifies, B is not cached (read from
//   the HDD only). With a cache that is not full, a miss is simply inserted.
//
// Thread-safety: not thread-safe; driven by one CacheDriver.
#ifndef RINGCACHE_CACHENODE_POLICY_RPAC_H_
#define RINGCACHE_CACHENODE_POLICY_RPAC_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "cachenode/policy/admission.h"

namespace ringcache::policy {

struct RpacConfig {
  uint32_t region_blocks = 8;  // R; paper 000 §IV-B: 8 blocks (Mail), 4 (Webvm)
  uint32_t depth = 2;          // d, depth of the sub-region tree (§IV-B: 2)
  uint64_t cycle = 800000;     // T, accesses per decay cycle (§IV-B: 800,000 for Mail)
  double alpha = 0.5;          // decay factor of eq. 1
  double c = 1.4;              // replacement margin of ineq. 2 (§IV-B: 1.4)
  size_t scan = 512;           // candidates scanned per miss (flashcache's set size, §V-A)
  bool judge_writes = false;   // true: write misses obey the veto too (write-around if refused)
  absl::Status Validate() const;
};

class RpacAdmission final : public Admission {
 public:
  // REQUIRES: config.Validate().ok().
  explicit RpacAdmission(const RpacConfig& config);

  std::string_view name() const override { return "rpac"; }
  void OnAccess(const Access& access, bool hit) override;
  bool Admit(const Access& access) override;
  bool judges_writes() const override { return config_.judge_writes; }
  size_t replacement_window() const override { return config_.scan; }
  int ChooseReplacement(const BlockKey& incoming, absl::Span<const SlotId> candidates,
                        const SlotTable& slots) override;
  size_t MetadataBytes() const override;

  // Returns the current popularity of `key`'s region (level 0) or of its sub-region at `level`
  // (1..depth); 0 if unknown.
  uint32_t PopularityForTest(const BlockKey& key, uint32_t level);
  size_t regions() const { return regions_.size(); }
  uint64_t accesses() const { return accesses_; }

 private:
  struct Region {
    uint32_t vdi;
    uint32_t epoch;   // cycle the counters are up to date for
    uint64_t number;  // block / R
    uint32_t pop;     // Pr of the region
  };

  BlockKey RegionKey(const BlockKey& key) const {
    return BlockKey{key.vdi, key.block / config_.region_blocks};
  }
  // Index of the node holding `key`'s sub-region at `level` (1..depth) inside its region's tree.
  uint32_t NodeIndex(const BlockKey& key, uint32_t level) const;
  // Returns the entry of `region_key`, or -1.
  int64_t Find(const BlockKey& region_key) const;
  // Applies the decay of every cycle elapsed since the entry was last touched (eq. 1).
  void Normalize(uint32_t e);
  uint32_t Decay(uint32_t v, uint32_t cycles) const;
  void RemoveEntry(uint32_t e);
  void Sweep(int steps);

  RpacConfig config_;
  uint32_t nodes_per_region_;  // 2^(d+1) - 2
  uint64_t accesses_ = 0;      // C_A
  uint32_t epoch_ = 0;         // C_A / T
  std::vector<Region> regions_;
  std::vector<uint32_t> nodes_;  // nodes_per_region_ counters per region, level-major
  absl::flat_hash_map<BlockKey, uint32_t> index_;
  size_t sweep_cursor_ = 0;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_RPAC_H_
