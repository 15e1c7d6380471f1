// RingFollower: a cache node follows the rings the coordinator publishes in etcd itself
// (membership/README.md "Control plane"), instead of learning them only from the requests and
// calls that reach it.
//
//  - The cache ring (P/rings/cache, membership/cache_ring_state.h): its epoch raises the node's
//    ring epoch (RequestGate::Raise). From then on a request routed on an older ring is refused
//    and its sender re-routes once it followed the newer ring; so a gateway that is cut off from
//    etcd, or slow to follow, cannot keep writing to this node on a ring the coordinator has
//    already replaced, even before any request with the newer epoch arrived here.
//  - The data ring (P/rings/data): a newer epoch than the node's is installed
//    (CacheNode::SetDataRing, saved beside the SSD file), so the homes it destages to follow the
//    coordinator's rebalance even while the coordinator's own push to this node is late. An older
//    or equal epoch changes nothing.
//
// What is watched is the rings' epochs alone (P/ring-epochs/, a few bytes per change, written
// with each ring: membership/cache_ring_state.h), from the revision of the first read on; the
// data ring itself is read only when its epoch is newer than the node's. The epochs are read
// again every `resync` (a watch stopped by compaction is caught up). A coordinator of an earlier
// release writes no epochs: then the rings are read whole, at each resync.
// Raising an epoch or adopting a newer data ring is always safe: the coordinator publishes each
// ring in etcd before it uses it, and its protocol (publish, then wait for every node) stays the
// barrier.
//
// Thread-safety: the follower runs on its own thread (and the watch threads, which only wake it);
// construct and destroy it from one thread.
#ifndef RINGCACHE_CACHENODE_RING_FOLLOWER_H_
#define RINGCACHE_CACHENODE_RING_FOLLOWER_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cachenode/cache_node.h"
#include "cachenode/service.h"
#include "common/wake_loop.h"
#include "membership/etcd_client.h"

namespace ringcache::cachenode {

class RingFollower {
 public:
  struct Options {
    std::string prefix = "/ringcache";
    absl::Duration resync = absl::Seconds(2);
  };
  // Follows once now (an error is logged, not returned: etcd may be down at the start), then in
  // the background. `client`, `node` and `gate` are not owned and must outlive the follower.
  static std::unique_ptr<RingFollower> Start(membership::EtcdClient* client, CacheNode* node,
                                             RequestGate* gate, Options options);
  ~RingFollower();
  RingFollower(const RingFollower&) = delete;
  RingFollower& operator=(const RingFollower&) = delete;

  // Reads both rings once and applies them.
  absl::Status SyncOnce();
  // The highest cache ring epoch read from etcd so far (0: none yet).
  uint64_t cache_epoch() const;

 private:
  RingFollower(membership::EtcdClient* client, CacheNode* node, RequestGate* gate, Options options);
  // SyncOnce, returning the etcd revision it read at.
  absl::StatusOr<int64_t> Sync();
  void RaiseCacheEpoch(uint64_t epoch);
  // Installs the data ring `value` (read at `key`) if it is newer than the node's.
  absl::Status ApplyDataRing(const std::string& key, const std::string& value);

  membership::EtcdClient* const client_;
  CacheNode* const node_;
  RequestGate* const gate_;
  const Options options_;
  std::unique_ptr<membership::Watch> watch_;  // P/ring-epochs/
  mutable absl::Mutex mu_;
  uint64_t cache_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<WakeLoop> loop_;
};

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_RING_FOLLOWER_H_
