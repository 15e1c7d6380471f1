// Bypass: sends accesses past the cache (CMF, sequential cutoff). A bypassed miss is neither
// admitted nor allowed to evict anything: a read is served by the data node, a write goes around
// to the data node (write-around). A hit is always served by the cache even when a bypass fires:
// the cached copy (possibly dirty) is the authoritative one and updating it costs no replacement.
//
// Thread-safety: not thread-safe; driven by one CacheDriver.
#ifndef RINGCACHE_CACHENODE_POLICY_BYPASS_H_
#define RINGCACHE_CACHENODE_POLICY_BYPASS_H_

#include <cstddef>
#include <string_view>

#include "cachenode/policy/types.h"

namespace ringcache::policy {

class Bypass {
 public:
  virtual ~Bypass() = default;

  virtual std::string_view name() const = 0;
  // Observes one access (every access, hit or miss; `hit` says whether its block is cached) and
  // returns true if, were it a miss, it should go around the cache.
  virtual bool Check(const Access& access, bool hit) = 0;
  // Returns the bytes of state this bypass holds.
  virtual size_t MetadataBytes() const = 0;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_BYPASS_H_
