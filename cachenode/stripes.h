// ObjectStripes: the cache node's per-object locks. Every operation on one object — foreground
// read, write, trim, and the destage, reclaim and relog of its blocks — holds its object's
// stripe, so a block's slot is never released or rewritten while another thread reads it, and
// writes to one object are applied in the order they took the stripe. Stripes are the outermost
// lock of the cache node (cachenode/README.md).
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_CACHENODE_STRIPES_H_
#define RINGCACHE_CACHENODE_STRIPES_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/synchronization/mutex.h"

namespace ringcache::cachenode {

class ObjectStripes {
 public:
  ObjectStripes() : mu_(new absl::Mutex[kStripes]) {}
  absl::Mutex& Of(uint32_t vdi, uint64_t object) {
    const uint64_t h = (object * 0x9E3779B97F4A7C15ULL) ^ (uint64_t{vdi} << 32 | vdi);
    return mu_[(h >> 17) % kStripes];
  }

 private:
  static constexpr size_t kStripes = 1024;
  std::unique_ptr<absl::Mutex[]> mu_;
};

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_STRIPES_H_
