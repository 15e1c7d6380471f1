// FifoOrder: see fifo.h.
#include "cachenode/policy/fifo.h"

namespace ringcache::policy {

void FifoOrder::Touch(SlotId slot) {
  // Insertion order only: a hit does not move the block.
  (void)slot;
}

}  // namespace ringcache::policy
