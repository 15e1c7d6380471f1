// SlotTable and SlotList: see slot_table.h.
#include "cachenode/policy/slot_table.h"

#include <cassert>

namespace ringcache::policy {

void SlotList::PushFront(Links& links, SlotId id) {
  links.set_prev(id, kNoSlot);
  links.set_next(id, head);
  if (head != kNoSlot) {
    links.set_prev(head, id);
  } else {
    tail = id;
  }
  head = id;
  ++size;
}

void SlotList::Unlink(Links& links, SlotId id) {
  const SlotId p = links.prev(id);
  const SlotId n = links.next(id);
  if (p != kNoSlot) {
    links.set_next(p, n);
  } else {
    head = n;
  }
  if (n != kNoSlot) {
    links.set_prev(n, p);
  } else {
    tail = p;
  }
  links.set_prev(id, kNoSlot);
  links.set_next(id, kNoSlot);
  --size;
}

void SlotList::MoveToFront(Links& links, SlotId id) {
  if (head == id) return;
  Unlink(links, id);
  PushFront(links, id);
}

SlotTable::SlotTable(size_t capacity) : capacity_(capacity), index_(&keys_) {
  assert(capacity > 0 && capacity < kNoSlot);
  keys_.Resize(capacity);
  links_.Resize(capacity);
  meta_.assign(capacity, 0);
  index_.Reserve(capacity);
  // Free chain in ascending slot order, so slot numbers are deterministic.
  for (size_t i = 0; i + 1 < capacity; ++i) links_.set_next(static_cast<SlotId>(i), i + 1);
  links_.set_next(static_cast<SlotId>(capacity - 1), kNoSlot);
  free_head_ = 0;
}

SlotId SlotTable::Allocate(const BlockKey& key, bool dirty) {
  assert(free_head_ != kNoSlot);
  const SlotId id = free_head_;
  free_head_ = links_.next(id);
  links_.set_next(id, kNoSlot);
  links_.set_prev(id, kNoSlot);
  keys_.Set(id, key);
  meta_[id] = dirty ? kDirtyBit : 0;
  index_.Insert(id);
  ++used_;
  return id;
}

void SlotTable::Free(SlotId id) {
  index_.Erase(id);
  meta_[id] = 0;
  links_.set_prev(id, kNoSlot);
  links_.set_next(id, free_head_);
  free_head_ = id;
  --used_;
}

size_t SlotTable::MetadataBytes() const {
  return keys_.MemoryBytes() + links_.MemoryBytes() + meta_.capacity() + index_.MemoryBytes();
}

}  // namespace ringcache::policy
