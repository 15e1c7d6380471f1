// LocalCacheClient: the gateway's CacheClient over a cache node in the same process — what
// ringcache-local (single-process mode) and the router's tests use instead of gRPC. It lives
// here, not in gateway/, so that the gateway depends on the cache node only through the wire.
//
// Thread-safety: thread-safe (as CacheNode is).
#ifndef RINGCACHE_TOOLS_LOCAL_LOCAL_CACHE_CLIENT_H_
#define RINGCACHE_TOOLS_LOCAL_LOCAL_CACHE_CLIENT_H_

#include <memory>

#include "cachenode/cache_node.h"
#include "gateway/cache_client.h"

namespace ringcache::local {

// In-process client over `node` (not owned; must outlive the client).
std::unique_ptr<gateway::CacheClient> MakeLocalCacheClient(cachenode::CacheNode* node);

}  // namespace ringcache::local

#endif  // RINGCACHE_TOOLS_LOCAL_LOCAL_CACHE_CLIENT_H_
