// Coordinator: the coordinator's work in a gateway daemon, for as long as this gateway holds the
// role. The gateway daemon (gateway/main.cc) builds the request routing (gateway::Router) and
// starts one Coordinator beside it:
//
// - static mode (no etcd): this gateway coordinates for its whole life. The data rebalancer runs
//   from the start, with the cluster file's data nodes.
// - cluster mode: the gateway stands for election (Campaign). Each term it wins, Lead() publishes
//   the cache ring under the term's guard, takes over from the previous leader, resumes the data
//   rebalancer where its predecessor stopped (purge mark and operator actions in etcd), follows
//   the membership (MembershipSync) and creates the --create-vdi VDIs; StepDown() stops all of
//   it, rebalancer first, so a deposed leader copies and purges nothing more.
//
// It also answers the admin API's questions that only the coordinator knows: the data ring and
// its rebalance, the scrub, data node actions, who leads.
//
// Thread-safety: thread-safe. Lead and StepDown run on the election's thread.
#ifndef RINGCACHE_COORDINATOR_COORDINATOR_H_
#define RINGCACHE_COORDINATOR_COORDINATOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/catalog.h"
#include "coordinator/data_rebalancer.h"
#include "coordinator/election.h"
#include "coordinator/etcd_state.h"
#include "coordinator/membership_sync.h"
#include "datanode/client/datanode_pool.h"
#include "gateway/admin_service.h"
#include "gateway/router.h"
#include "membership/etcd_client.h"
#include "membership/membership.h"

namespace ringcache::coordinator {

class Coordinator {
 public:
  struct Options {
    DataRebalancer::Options rebalancer;    // state_path, speeds, down-out
    std::vector<std::string> create_vdis;  // NAME:SIZE specs (--create-vdi)
    std::string prefix;                    // cluster mode: the etcd prefix
  };

  // `router`, `pool` and `catalog` are not owned and must outlive the coordinator;
  // `catalog_store` (cluster mode: the catalog's etcd store, its writes guarded by the term) may
  // be null. Sets the router's join hook.
  Coordinator(gateway::Router* router, datanode::DataNodePool* pool, Catalog* catalog,
              EtcdCatalogStore* catalog_store, Options options);
  ~Coordinator();  // stops campaigning (stepping down) and the rebalancer
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Static mode: coordinates from now on (the --create-vdi VDIs are the caller's, once the
  // cache nodes know the catalog); `data_nodes` are the cluster file's.
  void StartStatic(const std::vector<datanode::DataNodeEndpoint>& data_nodes);
  // Makes the admin API answer what only the coordinator knows: the data ring and its
  // rebalance, the scrub, data node actions; node states follow the membership. `admin` is not
  // owned and must outlive the coordinator; set before Campaign.
  void ServeAdmin(gateway::AdminService* admin);

  // Cluster mode: answers the admin API from etcd (who leads, which gateways are registered,
  // a drained node's mark). `client` is not owned and must outlive the coordinator.
  void FollowEtcd(membership::EtcdClient* client);
  // Cluster mode: stands for election with `registration`'s lease, then waits up to `wait` until
  // a coordinator is known (this gateway, or another one), so that administration works.
  void Campaign(membership::NodeRegistration* registration, uint32_t self_id, absl::Duration wait);
  // Stops campaigning; a leader steps down and hands over at once.
  void StopCampaign();

  bool leading() const { return leading_.load(); }

  // One term's start and end (the election's callback). Lead returns false when this gateway
  // cannot lead (it cannot take over the cache ring): the election then resigns the term.
  bool Lead(int64_t term);
  void StepDown();

 private:
  std::shared_ptr<DataRebalancer> rebalancer() const;
  void StartRebalancer();
  // Ends the rebalancer, if one runs: its thread is joined once the last reference goes.
  void StopRebalancer();
  void StopSync();
  // Has the membership sync (while leading) reconcile its last view again now.
  void NudgeMembership();
  // Lead's parts: follow the published ring and catalog, take over the cache ring, resume the
  // data rebalancer's records of the previous term.
  void CatchUp();
  bool TakeOverCacheRing(const membership::TxnCompare& guard);
  void ResumeDataRecords(const membership::TxnCompare& guard);

  gateway::Router* const router_;
  datanode::DataNodePool* const pool_;
  Catalog* const catalog_;
  EtcdCatalogStore* const catalog_store_;
  gateway::AdminService* admin_ = nullptr;
  Options options_;  // rebalancer's etcd hooks: set by Lead on the election's thread
  membership::EtcdClient* etcd_ = nullptr;
  std::atomic<bool> leading_{false};
  std::atomic<bool> led_once_{false};  // this gateway's first term finished starting its work

  mutable absl::Mutex mu_;
  std::shared_ptr<DataRebalancer> rebalancer_ ABSL_GUARDED_BY(mu_);
  // Set and reset by the election's thread; nudged by `node undrain`.
  std::unique_ptr<MembershipSync> sync_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Election> election_;
};

// The nodes registered in etcd now (records that do not decode are left out).
absl::StatusOr<std::vector<membership::NodeRecord>> RegisteredNodes(
    membership::EtcdClient* client, const std::string& prefix, absl::Duration timeout);

// Cluster mode (docs/upgrades.md): `ringcachectl cluster finalize`: raises the cluster's
// feature level (membership/feature_level.h) to the highest level every registered node's
// release supports, this one's included, and says what it did and which nodes hold it back.
absl::StatusOr<std::pair<uint32_t, std::string>> FinalizeFeatureLevel(
    membership::EtcdClient* client, const std::string& prefix);

}  // namespace ringcache::coordinator

#endif  // RINGCACHE_COORDINATOR_COORDINATOR_H_
