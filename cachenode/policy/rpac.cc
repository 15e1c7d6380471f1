// RpacAdmission: see rpac.h (paper 000: eq. 1, ineq. 2, Fig. 3 and Fig. 4).
#include "cachenode/policy/rpac.h"

#include <algorithm>
#include <cmath>

namespace ringcache::policy {

absl::Status RpacConfig::Validate() const {
  if (region_blocks < 1) return absl::InvalidArgumentError("rpac: region must be >= 1 block");
  if (depth > 8) return absl::InvalidArgumentError("rpac: depth must be <= 8");
  if ((1u << depth) > region_blocks) {
    return absl::InvalidArgumentError("rpac: 2^depth must not exceed region (blocks)");
  }
  if (cycle < 1 || cycle > (uint64_t{1} << 40)) {
    return absl::InvalidArgumentError("rpac: cycle must be in [1, 2^40]");
  }
  if (!(alpha > 0 && alpha < 1)) return absl::InvalidArgumentError("rpac: alpha must be in (0, 1)");
  if (!(c >= 1.0)) return absl::InvalidArgumentError("rpac: c must be >= 1 (paper: 1.2 to 1.5)");
  if (scan < 1) return absl::InvalidArgumentError("rpac: scan must be >= 1");
  return absl::OkStatus();
}

RpacAdmission::RpacAdmission(const RpacConfig& config)
    : config_(config), nodes_per_region_((2u << config.depth) - 2) {}

uint32_t RpacAdmission::NodeIndex(const BlockKey& key, uint32_t level) const {
  const uint64_t offset = key.block % config_.region_blocks;
  const uint64_t at_level = (offset << level) / config_.region_blocks;  // in [0, 2^level)
  return static_cast<uint32_t>((1u << level) - 2 + at_level);          // level-major layout
}

int64_t RpacAdmission::Find(const BlockKey& region_key) const {
  auto it = index_.find(region_key);
  return it == index_.end() ? -1 : static_cast<int64_t>(it->second);
}

uint32_t RpacAdmission::Decay(uint32_t v, uint32_t cycles) const {
  if (config_.alpha == 0.5) return cycles >= 32 ? 0 : v >> cycles;
  // Pr = alpha * Pr0 per cycle, integer as Fig. 4's Te; each step lowers v by >= 1, so this ends.
  for (uint32_t i = 0; i < cycles && v > 0; ++i) {
    v = static_cast<uint32_t>(std::floor(config_.alpha * v));
  }
  return v;
}

void RpacAdmission::Normalize(uint32_t e) {
  Region& r = regions_[e];
  if (r.epoch == epoch_) return;
  const uint32_t cycles = epoch_ - r.epoch;
  r.pop = Decay(r.pop, cycles);
  uint32_t* n = &nodes_[static_cast<size_t>(e) * nodes_per_region_];
  for (uint32_t i = 0; i < nodes_per_region_; ++i) n[i] = Decay(n[i], cycles);
  r.epoch = epoch_;
}

void RpacAdmission::RemoveEntry(uint32_t e) {
  const uint32_t last = static_cast<uint32_t>(regions_.size() - 1);
  index_.erase(BlockKey{regions_[e].vdi, regions_[e].number});
  if (e != last) {
    regions_[e] = regions_[last];
    std::copy_n(&nodes_[static_cast<size_t>(last) * nodes_per_region_], nodes_per_region_,
                &nodes_[static_cast<size_t>(e) * nodes_per_region_]);
    index_[BlockKey{regions_[e].vdi, regions_[e].number}] = e;
  }
  regions_.pop_back();
  nodes_.resize(regions_.size() * nodes_per_region_);
}

void RpacAdmission::Sweep(int steps) {
  for (int i = 0; i < steps && !regions_.empty(); ++i) {
    if (sweep_cursor_ >= regions_.size()) sweep_cursor_ = 0;
    const uint32_t e = static_cast<uint32_t>(sweep_cursor_);
    Normalize(e);
    // The root counts every access of the region, so a zero root means a zero tree.
    if (regions_[e].pop == 0) {
      RemoveEntry(e);  // the last entry moved into e: look at it next
    } else {
      ++sweep_cursor_;
    }
  }
}

void RpacAdmission::OnAccess(const Access& access, bool hit) {
  (void)hit;
  // Fig. 4 lines 1-8; eq. 1.
  ++accesses_;
  epoch_ = static_cast<uint32_t>(accesses_ / config_.cycle);
  const BlockKey rk = RegionKey(access.key);
  int64_t found = Find(rk);
  uint32_t e;
  if (found < 0) {
    e = static_cast<uint32_t>(regions_.size());
    regions_.push_back(Region{rk.vdi, epoch_, rk.block, 0});
    nodes_.resize(regions_.size() * nodes_per_region_, 0);
    index_.emplace(rk, e);
  } else {
    e = static_cast<uint32_t>(found);
    Normalize(e);
  }
  ++regions_[e].pop;
  uint32_t* n = &nodes_[static_cast<size_t>(e) * nodes_per_region_];
  for (uint32_t level = 1; level <= config_.depth; ++level) ++n[NodeIndex(access.key, level)];
  Sweep(2);
}

bool RpacAdmission::Admit(const Access& access) {
  // RPAC is a replacement rule: a miss with free space is always inserted (§III-C).
  (void)access;
  return true;
}

int RpacAdmission::ChooseReplacement(const BlockKey& incoming,
                                     absl::Span<const SlotId> candidates,
                                     const SlotTable& slots) {
  const BlockKey rb = RegionKey(incoming);
  const int64_t fb = Find(rb);
  if (fb < 0) return -1;  // Pr_B = 0 never exceeds c * Pr_A >= 0
  const uint32_t eb = static_cast<uint32_t>(fb);
  Normalize(eb);
  const double pr_b = regions_[eb].pop;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const BlockKey a = slots.key(candidates[i]);
    const BlockKey ra = RegionKey(a);
    if (!(ra == rb)) {
      const int64_t fa = Find(ra);
      if (fa < 0) return static_cast<int>(i);  // Fig. 4 line 17: unknown popularity counts as 0
      Normalize(static_cast<uint32_t>(fa));
      if (pr_b > config_.c * regions_[fa].pop) return static_cast<int>(i);  // ineq. 2
      continue;
    }
    // Same region (Fig. 4 lines 19-23): compare the sub-regions where A and B part.
    const uint32_t* n = &nodes_[static_cast<size_t>(eb) * nodes_per_region_];
    for (uint32_t level = 1; level <= config_.depth; ++level) {
      const uint32_t na = NodeIndex(a, level);
      const uint32_t nb = NodeIndex(incoming, level);
      if (na == nb) continue;
      if (static_cast<double>(n[nb]) > config_.c * n[na]) return static_cast<int>(i);
      break;
    }
  }
  return -1;
}

size_t RpacAdmission::MetadataBytes() const {
  return sizeof(*this) + regions_.capacity() * sizeof(Region) +
         nodes_.capacity() * sizeof(uint32_t) +
         index_.capacity() * (sizeof(std::pair<BlockKey, uint32_t>) + 1);
}

uint32_t RpacAdmission::PopularityForTest(const BlockKey& key, uint32_t level) {
  const int64_t f = Find(RegionKey(key));
  if (f < 0) return 0;
  Normalize(static_cast<uint32_t>(f));
  if (level == 0) return regions_[f].pop;
  return nodes_[static_cast<size_t>(f) * nodes_per_region_ + NodeIndex(key, level)];
}

}  // namespace ringcache::policy
