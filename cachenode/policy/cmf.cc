// CmfBypass: see cmf.h (paper 003 §II).
#include "cachenode/policy/cmf.h"

namespace ringcache::policy {

absl::Status CmfConfig::Validate() const {
  if (!(miss_threshold >= 0 && miss_threshold < 1)) {
    return absl::InvalidArgumentError("cmf: threshold must be in [0, 1)");
  }
  if (window < 1) return absl::InvalidArgumentError("cmf: window must be >= 1 access");
  if (check_interval_us < 1) return absl::InvalidArgumentError("cmf: interval_us must be >= 1");
  return absl::OkStatus();
}

bool CmfBypass::Check(const Access& access, bool hit) {
  VdiState& s = vdis_[access.key.vdi];
  if (s.off) {
    // Periodic check of the operation count since caching was turned off.
    const uint64_t elapsed = access.now_us >= s.check_start_us ? access.now_us - s.check_start_us : 0;
    if (elapsed >= config_.check_interval_us) {
      // Rate over the elapsed time, scaled to one interval: ops * interval / elapsed < reenable.
      const long double scaled = static_cast<long double>(s.check_ops) *
                                 static_cast<long double>(config_.check_interval_us) /
                                 static_cast<long double>(elapsed);
      if (scaled < static_cast<long double>(config_.reenable_ops)) {
        s = VdiState{};
        ++turned_on_;
      } else {
        s.check_start_us = access.now_us;
        s.check_ops = 0;
      }
    }
  }
  if (s.off) {
    ++s.check_ops;
    return true;
  }
  ++s.window_ops;
  if (!hit) ++s.window_misses;
  if (s.window_ops >= config_.window) {
    const double ratio = static_cast<double>(s.window_misses) / static_cast<double>(s.window_ops);
    s.window_ops = s.window_misses = 0;
    if (ratio > config_.miss_threshold) {
      s.off = true;
      s.check_start_us = access.now_us;  // "stores the time which will be used for reactivating"
      s.check_ops = 0;
      ++turned_off_;
      return true;
    }
  }
  return false;
}

bool CmfBypass::IsOff(uint32_t vdi) const {
  auto it = vdis_.find(vdi);
  return it != vdis_.end() && it->second.off;
}

size_t CmfBypass::MetadataBytes() const {
  return sizeof(*this) + vdis_.capacity() * (sizeof(std::pair<uint32_t, VdiState>) + 1);
}

}  // namespace ringcache::policy
