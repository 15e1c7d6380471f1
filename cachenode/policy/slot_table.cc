// SlotTable: see slot_table.h.
#include "cachenode/policy/slot_table.h"

#include <cassert>

namespace ringcache::policy {

SlotTable::SlotTable(size_t capacity) : index_(this) {
  assert(capacity > 0 && capacity < kNoSlot);
  records_.assign(capacity, Record{0, 0, kNoSlot, kNoSlot, 0});
  index_.Reserve(capacity);
  // Free chain in ascending slot order, so slot numbers are deterministic.
  for (size_t i = 0; i + 1 < capacity; ++i) records_[i].next = static_cast<SlotId>(i + 1);
  free_head_ = 0;
}

SlotId SlotTable::Allocate(const BlockKey& key, bool dirty) {
  assert(free_head_ != kNoSlot);
  const SlotId id = free_head_;
  Record& r = records_[id];
  free_head_ = r.next;
  r = Record{key.block, key.vdi, kNoSlot, kNoSlot, dirty ? kDirtyBit : uint8_t{0}};
  index_.Insert(id);
  ++used_;
  return id;
}

void SlotTable::Free(SlotId id) {
  index_.Erase(id);
  Record& r = records_[id];
  r.meta = 0;
  r.prev = kNoSlot;
  r.next = free_head_;
  free_head_ = id;
  --used_;
}

size_t SlotTable::MetadataBytes() const {
  return records_.capacity() * sizeof(Record) + index_.MemoryBytes();
}

}  // namespace ringcache::policy
