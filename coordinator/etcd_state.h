// The gateway's shared state in etcd (cluster mode, docs/design.md §7; key layout in
// membership/README.md), under the configurable prefix P:
//   P/vdis/<name>   one VDI catalog record: the catalog line "id name size_bytes object_size
//                   block_size replication mode" (coordinator/catalog.h)
//   P/rings/data    the data ring: epoch, data node addresses, members and (while a rebalance
//                   moves replicas) target, as protobuf text (datanode::EncodeDataRing)
//   P/rings/data-purge  present while replicas left on data nodes that are no longer their
//                   homes wait to be deleted (the rebalance switched rings and has not purged
//                   yet): a coordinator taking over finishes that purge
//   P/rings/data-actions  the operator's data node actions (`ringcachectl datanode
//                   out|in|decommission`) accepted and not carried out yet, one "<action> <id>"
//                   line each (coordinator/data_rebalancer.h): a coordinator taking over carries
//                   them out
// With an elected coordinator every write is guarded by its term (coordinator/election.h). The
// cache ring the coordinator publishes (P/rings/cache) is in membership/cache_ring_state.h and
// gateway/cluster_follower.h.
//
// Thread-safety: thread-safe (as EtcdClient).
#ifndef RINGCACHE_GATEWAY_ETCD_STATE_H_
#define RINGCACHE_GATEWAY_ETCD_STATE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/catalog.h"
#include "datanode/client/datanode_pool.h"
#include "membership/cache_ring_state.h"
#include "membership/etcd_client.h"

namespace ringcache::coordinator {

using membership::DataRingKey;                          // P/rings/data
std::string DataPurgeKey(const std::string& prefix);    // P/rings/data-purge
std::string DataActionsKey(const std::string& prefix);  // P/rings/data-actions
std::string VdiNextIdKey(const std::string& prefix);    // P/vdi-next-id

// The VDI catalog's records in etcd. `client` is not owned.
class EtcdCatalogStore final : public CatalogStore {
 public:
  EtcdCatalogStore(membership::EtcdClient* client, std::string prefix)
      : client_(client), prefix_(std::move(prefix)) {}
  absl::StatusOr<Contents> LoadAll() override;
  absl::Status Put(const VdiRecord& r, uint32_t next_id) override;
  absl::Status Remove(const std::string& name) override;
  // With an elected coordinator: writes only while `guard` holds (its term); FAILED_PRECONDITION
  // otherwise, so a deposed leader cannot change the catalog. nullopt: unguarded (the default).
  void SetGuard(std::optional<membership::TxnCompare> guard) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  std::optional<membership::TxnCompare> guard() const ABSL_LOCKS_EXCLUDED(mu_);

  membership::EtcdClient* const client_;
  const std::string prefix_;
  mutable absl::Mutex mu_;
  std::optional<membership::TxnCompare> guard_ ABSL_GUARDED_BY(mu_);
};

// Reads the data ring kept in etcd (nullopt when none was written yet).
absl::StatusOr<std::optional<datanode::DataRing>> LoadEtcdDataRing(membership::EtcdClient* client,
                                                                   const std::string& prefix);
// Writes the data ring. With `guard` (the coordinator's term, coordinator/election.h) only while
// it holds: FAILED_PRECONDITION when it does not (a deposed coordinator never overwrites its
// successor's ring).
absl::Status SaveEtcdDataRing(membership::EtcdClient* client, const std::string& prefix,
                              const datanode::DataRing& ring,
                              const std::optional<membership::TxnCompare>& guard = std::nullopt);
// The purge mark (P/rings/data-purge): written before a rebalance switches rings, deleted once
// the replicas on former homes are deleted; guarded like SaveEtcdDataRing.
absl::Status SaveEtcdDataPurge(membership::EtcdClient* client, const std::string& prefix,
                               bool pending,
                               const std::optional<membership::TxnCompare>& guard = std::nullopt);
absl::StatusOr<bool> LoadEtcdDataPurge(membership::EtcdClient* client, const std::string& prefix);

// The operator's data node actions not carried out yet (data_rebalancer.h): the nodes to take
// out, to put back in and to decommission.
struct DataActions {
  absl::flat_hash_set<uint32_t> out;
  absl::flat_hash_set<uint32_t> in;
  absl::flat_hash_set<uint32_t> decommission;
  bool empty() const { return out.empty() && in.empty() && decommission.empty(); }
  bool operator==(const DataActions&) const = default;
};
// The actions in text, one "<action> <id>" line each (ids sorted; "" for none), and back: the
// lines read are added to *a (a bad line: kDataLoss naming it; the lines before it are in *a).
// The text is what the rebalancer keeps in its state file, and what etcd holds at etcd-value 1.
std::string EncodeDataActions(const DataActions& a);
absl::Status DecodeDataActions(const std::string& text, DataActions* a);

// The pending actions in etcd (P/rings/data-actions; none deletes the key), and back (none when
// the key is missing): text, or an EtcdValue once the cluster's feature level allows it
// (membership/etcd_value.h).
absl::Status SaveEtcdDataActions(membership::EtcdClient* client, const std::string& prefix,
                                 const DataActions& actions,
                                 const std::optional<membership::TxnCompare>& guard);
absl::StatusOr<DataActions> LoadEtcdDataActions(membership::EtcdClient* client,
                                                const std::string& prefix);

// The cache ring the coordinator publishes at P/rings/cache (membership/cache_ring_state.h,
// which also reads it), written only under the leader's guard (coordinator/election.h), so a
// deposed leader cannot overwrite its successor's ring.
// Writes `state` if `guard` holds; kFailedPrecondition if it does not (no longer the leader).
absl::Status PublishEtcdCacheRing(membership::EtcdClient* client, const std::string& prefix,
                                  const membership::TxnCompare& guard,
                                  const membership::CacheRingState& state);
// The lowest epoch a new coordinator may start above: the published ring's epoch and the etcd
// store revision (epochs of gateways from before the ring was published were revisions).
absl::StatusOr<uint64_t> TakeOverEpoch(membership::EtcdClient* client, const std::string& prefix);

}  // namespace ringcache::coordinator

#endif  // RINGCACHE_GATEWAY_ETCD_STATE_H_
