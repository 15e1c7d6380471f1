// LruOrder: see lru.h.
#include "cachenode/policy/lru.h"

namespace ringcache::policy {

void LruOrder::Remove(SlotId slot, bool evicted) {
  (void)evicted;
  list_.Unlink(slots_->links(), slot);
}

size_t LruOrder::Candidates(absl::Span<SlotId> out) {
  size_t n = 0;
  for (SlotId s = list_.tail; s != kNoSlot && n < out.size(); s = slots_->links().prev(s)) {
    out[n++] = s;
  }
  return n;
}

}  // namespace ringcache::policy
