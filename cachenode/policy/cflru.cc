// CflruOrder: see cflru.h.
#include "cachenode/policy/cflru.h"

namespace ringcache::policy {

size_t CflruOrder::Candidates(absl::Span<SlotId> out) {
  const SlotTable& links = *slots_;
  size_t n = 0;
  // Pass 1: clean blocks of the clean-first region, least recently used first.
  size_t seen = 0;
  SlotId s = list_.tail;
  for (; s != kNoSlot && seen < window_ && n < out.size(); s = links.prev(s), ++seen) {
    if (!slots_->dirty(s)) out[n++] = s;
  }
  if (n == out.size()) return n;
  // Pass 2: everything else in LRU order: dirty blocks of the region, then the working region.
  seen = 0;
  for (s = list_.tail; s != kNoSlot && n < out.size(); s = links.prev(s), ++seen) {
    if (seen < window_ && !slots_->dirty(s)) continue;  // already emitted
    out[n++] = s;
  }
  return n;
}

}  // namespace ringcache::policy
