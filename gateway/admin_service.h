// The Admin gRPC service of the gateway (used by ringcachectl): VDI create/list/delete/resize/
// set-mode, node list, status, stats and flush with progress, carried out through the Router.
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_GATEWAY_ADMIN_SERVICE_H_
#define RINGCACHE_GATEWAY_ADMIN_SERVICE_H_

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics.h"
#include "gateway/router.h"
#include "membership/membership.h"
#include "ringcache/v1/admin.grpc.pb.h"

namespace ringcache::gateway {

// Returns the `settle` of Router::RemoveCacheNode for cache node `id`: a node that answers
// destages everything (with `register_first`, the catalogued VDIs are registered on it first, so
// that a node which restarted and forgot them can destage); a dead one's write-back log is
// replayed home from the data nodes (docs/design.md §7). `router` is not owned.
std::function<absl::Status(CacheClient*, bool alive)> CacheNodeSettle(Router* router, uint32_t id,
                                                                      bool register_first);

class AdminService final : public v1::Admin::Service {
 public:
  // `router` is not owned. `nodes` describes the static membership for ListNodes/ClusterStatus.
  AdminService(Router* router, std::vector<v1::NodeInfo> nodes)
      : router_(router), nodes_(std::move(nodes)) {}
  ~AdminService() override;

  // Starts the health watch: every `every`, each cache node in the ring is asked for its state
  // (CacheClient::Health, answering within a second) and the data nodes are probed. ListNodes
  // and ClusterStatus then show a cache node that does not answer as "down" (and "failed" /
  // "quarantined" as it reports), a data node unreachable for two rounds as "down"; status and
  // stats skip nodes that are down instead of waiting on them. Changes are logged.
  void StartHealthWatch(absl::Duration every);
  // Stops the health watch and waits for its thread (it calls the router: stop it before the
  // router goes away). Idempotent; the destructor calls it too.
  void StopHealthWatch();

  grpc::Status CreateVdi(grpc::ServerContext*, const v1::CreateVdiRequest*,
                         v1::CreateVdiResponse*) override;
  grpc::Status ListVdis(grpc::ServerContext*, const v1::ListVdisRequest*,
                        v1::ListVdisResponse*) override;
  grpc::Status DeleteVdi(grpc::ServerContext*, const v1::RemoveVdiRequest*,
                         v1::RemoveVdiResponse*) override;
  grpc::Status ResizeVdi(grpc::ServerContext*, const v1::ResizeVdiRequest*,
                         v1::ResizeVdiResponse*) override;
  grpc::Status SetVdiMode(grpc::ServerContext*, const v1::SetVdiModeRequest*,
                          v1::SetVdiModeResponse*) override;
  grpc::Status SetVdiPolicy(grpc::ServerContext*, const v1::SetVdiPolicyRequest*,
                            v1::SetVdiPolicyResponse*) override;
  grpc::Status SetVdiAccess(grpc::ServerContext*, const v1::SetVdiAccessRequest*,
                            v1::SetVdiAccessResponse*) override;
  grpc::Status InvalidateVdi(grpc::ServerContext*, const v1::InvalidateCacheRequest*,
                             v1::InvalidateCacheResponse*) override;
  grpc::Status UndrainNode(grpc::ServerContext*, const v1::UndrainNodeRequest*,
                           v1::UndrainNodeResponse*) override;
  grpc::Status ResizeNode(grpc::ServerContext*, const v1::ResizeNodeRequest*,
                          v1::ResizeTiersResponse*) override;
  grpc::Status ListNodes(grpc::ServerContext*, const v1::ListNodesRequest*,
                         v1::ListNodesResponse*) override;
  grpc::Status RemoveNode(grpc::ServerContext*, const v1::RemoveNodeRequest*,
                          v1::RemoveNodeResponse*) override;
  grpc::Status ClusterStatus(grpc::ServerContext*, const v1::ClusterStatusRequest*,
                             v1::ClusterStatusResponse*) override;
  grpc::Status VdiStats(grpc::ServerContext*, const v1::VdiStatsRequest*,
                        v1::VdiStatsResponse*) override;
  grpc::Status Flush(grpc::ServerContext*, const v1::FlushRequest*,
                     grpc::ServerWriter<v1::FlushProgress>*) override;
  grpc::Status DataNodeAction(grpc::ServerContext*, const v1::DataNodeActionRequest*,
                              v1::DataNodeActionResponse*) override;
  grpc::Status Scrub(grpc::ServerContext*, const v1::ClusterScrubRequest*,
                     v1::ClusterScrubStatus*) override;
  // admin_cluster.cc: the cluster's feature level, its finalize, and the VDI limits it gates.
  grpc::Status SetVdiQos(grpc::ServerContext*, const v1::SetVdiQosRequest*,
                         v1::SetVdiQosResponse*) override;
  grpc::Status GetClusterVersion(grpc::ServerContext*, const v1::ClusterVersionRequest*,
                                 v1::ClusterVersionResponse*) override;
  grpc::Status FinalizeCluster(grpc::ServerContext*, const v1::FinalizeClusterRequest*,
                               v1::FinalizeClusterResponse*) override;

  // Sets the state ListNodes shows for node (role, id) ("up", "removed", ...).
  void SetNodeState(const std::string& role, uint32_t id, const std::string& state);
  // Data rebalancing (coordinator/data_rebalancer.h): ClusterStatus reports `status()`, and the
  // data nodes of `ring()` are listed (joined ones too) with state "up" (ring member) or
  // "joining" (replicas being copied to it). Set before serving.
  // Exports ringcache_gateway_members{role,node,state} (1 per member, from what `status` shows)
  // and the data rebalance's progress to `registry` (not owned; this service must outlive its
  // scrapes: stop the metrics endpoint first).
  void ExportMetrics(metrics::Registry* registry);

  // Called with the name of each VDI this service deleted (its metric series go away). Set
  // before serving.
  void SetVdiDeletedHook(std::function<void(const std::string&)> hook) {
    absl::MutexLock l(&mu_);
    vdi_deleted_ = std::move(hook);
  }
  void SetDataRingSource(std::function<v1::DataRebalance()> status,
                         std::function<datanode::DataRing()> ring) {
    absl::MutexLock l(&mu_);
    rebalance_status_ = std::move(status);
    data_ring_ = std::move(ring);
  }
  // Carries out `ringcachectl datanode out|in|decommission` (DataRebalancer::Action of the
  // coordinator's rebalancer). Set before serving; without it the calls fail.
  void SetDataNodeActions(
      std::function<absl::StatusOr<std::string>(uint32_t, const std::string&)> act) {
    absl::MutexLock l(&mu_);
    data_node_action_ = std::move(act);
  }
  // The scrub of the coordinator's rebalancer: `poll(start)` polls and repairs now, `last`
  // gives the last poll's status (metrics; empty when none). Set before serving.
  void SetScrub(std::function<absl::StatusOr<v1::ClusterScrubStatus>(bool)> poll,
                std::function<v1::ClusterScrubStatus()> last);
  // Cluster mode with an elected coordinator: `leading` says whether this gateway leads now and
  // `leader` names the leader. A gateway that does not lead refuses the calls that change the
  // cluster (VDI create/delete/resize/mode/access/invalidate, node remove/undrain) with
  // FAILED_PRECONDITION naming the leader: the coordinator makes every catalog write and
  // membership decision. Set before serving; without it (static mode) this gateway decides.
  void SetCoordinator(std::function<bool()> leading, std::function<std::string()> leader) {
    absl::MutexLock l(&mu_);
    leading_ = std::move(leading);
    leader_ = std::move(leader);
  }
  // Cluster mode: the cluster's feature level as etcd holds it (`get`), and `finalize`, which
  // raises it to the highest every registered node supports and returns the level then and
  // what happened. Without them (static mode) the gateway runs at its release's highest level.
  // Set before serving.
  void SetFeatureLevel(std::function<absl::StatusOr<uint32_t>()> get,
                       std::function<absl::StatusOr<std::pair<uint32_t, std::string>>()> finalize) {
    absl::MutexLock l(&mu_);
    feature_level_ = std::move(get);
    finalize_ = std::move(finalize);
  }
  // Cluster mode: the nodes registered in etcd now, so that node lists show the other gateways
  // up or down (without it every gateway listed is shown up) and every node's release. Set
  // before serving.
  void SetRegistered(
      std::function<absl::StatusOr<std::vector<membership::NodeRecord>>()> registered) {
    absl::MutexLock l(&mu_);
    registered_ = std::move(registered);
  }
  // Cluster mode: runs before an operator's RemoveNode of cache node `id` (the gateway marks the
  // node as drained in etcd, so that the membership does not bring it back). Set before serving.
  void SetBeforeRemove(std::function<absl::Status(uint32_t id)> hook) {
    absl::MutexLock l(&mu_);
    before_remove_ = std::move(hook);
  }
  // Cluster mode: `ringcachectl node undrain` of cache node `id`: clears its drained mark in
  // etcd and has the membership look again; returns whether the node is registered now (it then
  // joins), kNotFound when it is neither registered nor marked drained. Set before serving;
  // without it (static mode) the gateway joins the node itself.
  void SetUndrain(std::function<absl::StatusOr<bool>(uint32_t id)> hook) {
    absl::MutexLock l(&mu_);
    undrain_ = std::move(hook);
  }

 private:
  void ExportRebalanceMetrics(metrics::Registry* registry);
  // Cluster mode: waits until cache node `id` serves in the ring again (the membership joins it).
  grpc::Status AwaitJoined(uint32_t id, v1::UndrainNodeResponse* resp);
  void ExportScrubMetrics(metrics::Registry* registry);
  Router* const router_;
  mutable absl::Mutex mu_;
  std::vector<v1::NodeInfo> nodes_ ABSL_GUARDED_BY(mu_);
  std::function<absl::Status(uint32_t)> before_remove_ ABSL_GUARDED_BY(mu_);
  std::function<absl::StatusOr<bool>(uint32_t)> undrain_ ABSL_GUARDED_BY(mu_);
  std::function<v1::DataRebalance()> rebalance_status_ ABSL_GUARDED_BY(mu_);
  void SetDrainProgress(uint32_t id, const std::string& progress, uint64_t start, uint64_t left);
  std::function<void(const std::string&)> vdi_deleted_ ABSL_GUARDED_BY(mu_);
  std::function<datanode::DataRing()> data_ring_ ABSL_GUARDED_BY(mu_);
  std::function<absl::StatusOr<std::string>(uint32_t, const std::string&)> data_node_action_
      ABSL_GUARDED_BY(mu_);
  std::function<absl::StatusOr<v1::ClusterScrubStatus>(bool)> scrub_poll_ ABSL_GUARDED_BY(mu_);
  std::function<v1::ClusterScrubStatus()> scrub_last_ ABSL_GUARDED_BY(mu_);
  std::function<bool()> leading_ ABSL_GUARDED_BY(mu_);
  std::function<std::string()> leader_ ABSL_GUARDED_BY(mu_);
  std::function<absl::StatusOr<std::vector<membership::NodeRecord>>()> registered_
      ABSL_GUARDED_BY(mu_);
  std::function<absl::StatusOr<uint32_t>()> feature_level_ ABSL_GUARDED_BY(mu_);
  std::function<absl::StatusOr<std::pair<uint32_t, std::string>>()> finalize_ ABSL_GUARDED_BY(mu_);
  // OK, or the refusal of a change on a gateway that is not the coordinator.
  grpc::Status CheckCoordinator() const;
  // The cluster's feature level (cluster mode: from etcd), or this release's highest in static
  // mode; *cluster_mode says which.
  absl::StatusOr<uint32_t> FeatureLevel(bool* cluster_mode) const;
  // Health watch: state of each cache node that is not "up" (down, failed, quarantined).
  void WatchOnce();
  std::vector<uint32_t> DownCacheNodes() const;
  absl::flat_hash_map<uint32_t, std::string> cache_health_ ABSL_GUARDED_BY(mu_);
  // What each cache node reported of itself at its last answer (SSD use, dirty, hits).
  absl::flat_hash_map<uint32_t, CacheClient::NodeHealth> cache_usage_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> data_down_ ABSL_GUARDED_BY(mu_);
  bool stop_watch_ ABSL_GUARDED_BY(mu_) = false;
  bool watched_ ABSL_GUARDED_BY(mu_) = false;  // one round done: cache_health_ is current
  std::thread watch_;
  // The node list: the static one, with the data nodes of the current data ring merged in.
  std::vector<v1::NodeInfo> Nodes() const;
  static void AddDataRing(const datanode::DataRing& ring, const std::vector<uint32_t>& data_down,
                          std::vector<v1::NodeInfo>* nodes);
  // Adds to the cache nodes of `nodes` what their last health answer said (SSD use, dirty, hits).
  void FillCacheUsage(std::vector<v1::NodeInfo>* nodes) const;
};

}  // namespace ringcache::gateway

#endif  // RINGCACHE_GATEWAY_ADMIN_SERVICE_H_
