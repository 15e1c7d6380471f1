// LcrVictim: see lcr.h (paper 004, Alg. 1 SELECT_VICTIM_BLOCK).
#include "cachenode/policy/lcr.h"

#include <limits>

namespace ringcache::policy {

size_t LcrVictim::Choose(absl::Span<const SlotId> candidates, const SlotTable& slots) {
  double min_load = std::numeric_limits<double>::infinity();  // Alg. 1 line 5
  size_t victim = 0;
  const size_t n = candidates.size() < window_ ? candidates.size() : window_;
  for (size_t x = 0; x < n; ++x) {                 // lines 7-16, from the tail
    const SlotId s = candidates[x];
    if (!slots.dirty(s)) return x;                 // lines 9-10: a clean block first
    const double load = load_ ? load_->HomeLoad(slots.key(s)) : 0.0;
    if (load < min_load) {                         // lines 11-13
      min_load = load;
      victim = x;
    }
  }
  return victim;                                   // line 17
}

bool LcrVictim::DecidedBy(absl::Span<const SlotId> prefix, const SlotTable& slots) const {
  for (size_t x = 0; x < prefix.size() && x < window_; ++x) {
    if (!slots.dirty(prefix[x])) return true;
  }
  return false;
}

}  // namespace ringcache::policy
