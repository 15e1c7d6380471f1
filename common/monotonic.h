// RaiseTo: an atomic that only grows. Ring epochs and coordinator terms are such values: a
// thread that read an older one before a change and stores it after must not lower it.
#ifndef RINGCACHE_COMMON_MONOTONIC_H_
#define RINGCACHE_COMMON_MONOTONIC_H_

#include <atomic>
#include <cstdint>

namespace ringcache {

// Raises `*a` to `value` unless it already holds as much. Returns what it held before: a value
// above `value` means `value` is stale.
inline uint64_t RaiseTo(std::atomic<uint64_t>* a, uint64_t value,
                        std::memory_order order = std::memory_order_seq_cst) {
  uint64_t seen = a->load(order);
  while (value > seen && !a->compare_exchange_weak(seen, value, order)) {
  }
  return seen;
}

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_MONOTONIC_H_
