// KeyLru: see key_lru.h.
#include "cachenode/policy/key_lru.h"

#include <algorithm>
#include <cassert>

namespace ringcache::policy {

KeyLru::KeyLru(size_t max_entries) : max_entries_(max_entries), index_(&keys_) {
  assert(max_entries > 0 && max_entries < kNoSlot);
}

SlotId KeyLru::NewEntry() {
  if (free_head_ != kNoSlot) {
    const SlotId id = free_head_;
    free_head_ = links_.next(id);
    return id;
  }
  const size_t n = keys_.size();
  // Grow geometrically, never past max_entries_ (the list never holds more).
  const size_t grown = std::min(max_entries_, std::max<size_t>(16, n * 2));
  assert(grown > n);
  keys_.Resize(grown);
  links_.Resize(grown);
  tags_.resize(grown, 0);
  for (size_t i = grown; i-- > n + 1;) {
    links_.set_next(static_cast<SlotId>(i), free_head_);
    free_head_ = static_cast<SlotId>(i);
  }
  return static_cast<SlotId>(n);
}

SlotId KeyLru::PushFront(const BlockKey& key, uint8_t tag) {
  if (list_.size >= max_entries_) PopBack();
  const SlotId id = NewEntry();
  keys_.Set(id, key);
  tags_[id] = tag;
  index_.Insert(id);
  list_.PushFront(links_, id);
  return id;
}

void KeyLru::Erase(SlotId id) {
  list_.Unlink(links_, id);
  index_.Erase(id);
  links_.set_next(id, free_head_);
  free_head_ = id;
}

size_t KeyLru::MemoryBytes() const {
  return keys_.MemoryBytes() + links_.MemoryBytes() + tags_.capacity() + index_.MemoryBytes();
}

}  // namespace ringcache::policy
