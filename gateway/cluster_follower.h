// The gateway's side of the control plane split (membership/README.md "Control plane"):
// ClusterFollower makes a gateway that is not the coordinator follow the published cache ring
// (Router::FollowRingState) and the VDI catalog (Catalog::Reload). A watch on each key wakes it
// at once; a look every `resync` also covers a watch that stopped (compaction). The coordinator
// writes both (coordinator/etcd_state.h).
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_GATEWAY_CLUSTER_FOLLOWER_H_
#define RINGCACHE_GATEWAY_CLUSTER_FOLLOWER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/wake_loop.h"
#include "coordinator/catalog.h"
#include "gateway/router.h"
#include "membership/etcd_client.h"

namespace ringcache::gateway {

class ClusterFollower {
 public:
  struct Options {
    std::string prefix;
    absl::Duration resync = absl::Seconds(2);
  };
  // Follows once now (the error says what failed), then keeps following in the background.
  // While `leading()` returns true nothing is followed (the coordinator writes both). `client`,
  // `router` and `catalog` are not owned and must outlive the follower.
  static absl::StatusOr<std::unique_ptr<ClusterFollower>> Start(membership::EtcdClient* client,
                                                                Router* router, Catalog* catalog,
                                                                Options options,
                                                                std::function<bool()> leading);
  ~ClusterFollower();
  ClusterFollower(const ClusterFollower&) = delete;
  ClusterFollower& operator=(const ClusterFollower&) = delete;

 private:
  ClusterFollower(membership::EtcdClient* client, Router* router, Catalog* catalog, Options options,
                  std::function<bool()> leading);
  absl::Status SyncOnce();

  membership::EtcdClient* const client_;
  Router* const router_;
  Catalog* const catalog_;
  const Options options_;
  const std::function<bool()> leading_;
  std::unique_ptr<WakeLoop> loop_;
  std::unique_ptr<membership::Watch> ring_watch_, vdis_watch_;
};

}  // namespace ringcache::gateway

#endif  // RINGCACHE_GATEWAY_CLUSTER_FOLLOWER_H_
