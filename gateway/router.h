// Router: the gateway's core. Serves VDIs as NBD exports (ExportProvider): splits each request by
// object, sends each piece to the object's owning cache node on the cache ring (pieces of one
// request in parallel), and assembles the reply. Also carries out VDI administration: every VDI
// is registered on every data node (geometry checks) and cache node (its blocks' home).
//
// Membership: the cache nodes given at construction plus those learned later (LearnCacheNode:
// cluster mode, registered in etcd but not in the cluster file), minus those removed
// (RemoveCacheNode). A removal holds the requests for the leaving node's objects while its dirty
// data is settled (destaged by a live node, replayed from the log for a dead one), then routes
// them to their next owners on the new ring; removals and learned nodes are kept in state files
// so a restarted gateway routes to the same ring.
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_GATEWAY_ROUTER_H_
#define RINGCACHE_GATEWAY_ROUTER_H_

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics.h"
#include "gateway/qos.h"
#include "coordinator/catalog.h"
#include "coordinator/ring_change.h"
#include "datanode/client/datanode_pool.h"
#include "gateway/block_device.h"
#include "gateway/cache_client.h"
#include "membership/cache_ring_state.h"
#include "ring/ring.h"

namespace ringcache::gateway {

// The published cache ring's form and keys (membership/cache_ring_state.h).
using membership::CacheRingKey;
using membership::CacheRingState;
using membership::DataRingKey;
using membership::DecodeCacheRingState;
using membership::EncodeCacheRingState;
using membership::LoadEtcdCacheRing;
// The VDI catalog the router serves (coordinator/catalog.h).
using coordinator::Catalog;
using coordinator::ValidateClientIdentity;
using coordinator::ValidateVdiName;
using coordinator::VdiDefaults;
using coordinator::VdiRecord;

struct CacheMember {
  uint32_t id = 0;
  double weight = 1.0;
  std::unique_ptr<CacheClient> client;
};

class Router : public ExportProvider {
 public:
  // `catalog` and `data_nodes` are not owned and must outlive the router.
  static absl::StatusOr<std::unique_ptr<Router>> Create(Catalog* catalog,
                                                        std::vector<CacheMember> cache_nodes,
                                                        datanode::DataNodePool* data_nodes);

  // ExportProvider.
  absl::StatusOr<ExportInfo> Find(const std::string& name) override;
  std::vector<ExportInfo> List() override;
  absl::StatusOr<std::shared_ptr<BlockDevice>> Open(const std::string& name) override;

  // Registers every catalogued VDI on every data node and cache node (startup, or after a node
  // restarted and forgot them).
  absl::Status RegisterAll();
  absl::StatusOr<VdiRecord> CreateVdi(const std::string& name, uint64_t size, uint32_t object_size,
                                      uint32_t replication);
  absl::Status DeleteVdi(const std::string& name);
  absl::StatusOr<VdiRecord> ResizeVdi(const std::string& name, uint64_t size);
  absl::Status SetMode(const std::string& name, v1::CacheMode mode);
  // Switches the VDI's cache policy on every live cache node (all or none), then records it in
  // the catalog so joining and restarted nodes get it. "" or "default": the nodes' own.
  absl::Status SetPolicy(const std::string& name, const std::string& policy);
  // Gives the VDI its share of every cache node's SSD (in thousandths; 0: none) by registering
  // it again with them: every live node takes it or, if one refuses (a node policy without
  // 'vbq', minimums past what its cache keeps), none keeps it. The caller records it in the
  // catalog (Catalog::SetQos); nodes that join later get it with the VDI.
  absl::Status SetShares(const std::string& name, uint32_t min_permille, uint32_t max_permille);
  // Destages the VDI (or every VDI when name is empty) on every cache node; `progress` (may be
  // empty) is called after each node with the dirty bytes still left on the nodes done so far.
  absl::Status Flush(const std::string& name,
                     const std::function<void(size_t nodes_done, uint64_t dirty_left)>& progress);
  // Drops VDI `name`'s clean cached blocks on every serving cache node. With `flush` its dirty
  // blocks are destaged first; without, kFailedPrecondition while any node holds some (they are
  // the only copy). Blocks a write dirties meanwhile are kept and counted.
  struct Invalidated {
    uint64_t dropped = 0;
    uint64_t dirty_kept = 0;
    uint32_t nodes = 0;
  };
  absl::StatusOr<Invalidated> InvalidateVdi(const std::string& name, bool flush);
  // Per-VDI statistics summed over cache nodes, except those in `skip` (known to be down).
  absl::Status Stats(const std::string& name, std::vector<v1::VdiCacheStats>* out,
                     const std::vector<uint32_t>& skip = {});

  // Runs `op` against the cache node owning (vdi, object), re-registering the VDI once if that
  // node does not know it (it restarted). The request carries the ring epoch (ring_epoch());
  // an owner that refuses it as stale (it has seen a newer ring: cachenode/service.h) or fenced
  // is retried every 100 ms for up to a minute, re-routed each time.
  absl::Status OnOwner(const v1::VdiGeometry& g, uint64_t object,
                       const std::function<absl::Status(CacheClient*)>& op);
  // The fast path of a read inside one object: sends it to the object's owner without waiting
  // (CacheClient::ReadAsync) and returns true; `done` then runs once, on the owner's connection
  // thread, with OK and the data in `out` — or with an error, after which the caller reads again
  // through OnOwner, which retries and re-routes. Returns false without calling `done` when the
  // object is not ready for it (its owner is leaving, it moves to a joining node) or the owner's
  // client has no asynchronous path: then read through OnOwner. The call counts as in flight
  // (ring changes wait for it) until `done` runs.
  bool TryReadAsync(const v1::VdiGeometry& g, uint64_t object, uint32_t offset, uint32_t len,
                    char* out, absl::AnyInvocable<void(absl::Status)> done);
  // Exports the router's metrics to `registry` (not owned, outlives the router): per cache node,
  // calls by status code, their latency and retries; the ring epoch; removals in progress.
  // REQUIRES: called once, before serving.
  void ExportMetrics(metrics::Registry* registry);

  Catalog* catalog() const { return catalog_; }
  // The VDIs' I/O limiters (gateway/qos.h).
  QosRegistry* qos() const { return qos_.get(); }
  // The cache ring epoch requests carry, and the fencing token of what they write. It grows
  // with every ownership change — each removal and join, in both modes, before any request is
  // routed on the new ring, so a new owner never writes at its predecessor's epoch — and in
  // cluster mode also to the etcd revision of the membership view (SetRingEpoch, only raises).
  // Persisted with the removals.
  uint64_t ring_epoch() const;
  // The members (id, weight) of the ring objects are routed over now.
  std::vector<std::pair<uint32_t, double>> RingMembers() const;
  void SetRingEpoch(uint64_t epoch);
  size_t cache_node_count() const;
  datanode::DataNodePool* data_nodes() const { return data_nodes_; }

  // Loads the removed cache nodes from `path` (if it exists) and keeps later removals there; also
  // loads the learned cache nodes (LearnCacheNode) from `added_cache_nodes` in the same
  // directory, and keeps later ones there. Call before serving.
  absl::Status LoadRemoved(const std::string& path);
  // Takes cache node `id` out of the cache ring. Requests for its objects wait (new ones) or
  // finish (in flight) first; then `settle(client, alive)` must leave none of the node's dirty
  // data behind (alive: it answered a probe) and is retried until it succeeds or `attempts` run
  // out; only then do the objects move to their next owners. `progress` (may be empty) is told
  // what happens.
  absl::Status RemoveCacheNode(uint32_t id,
                               const std::function<absl::Status(CacheClient*, bool alive)>& settle,
                               const std::function<void(const std::string&)>& progress,
                               int attempts = 600);
  std::vector<uint32_t> removed() const;
  // Asks cache node `id` for its own state (quarantined, device failed), waiting at most
  // `timeout_ms`; kNotFound for an unknown id, kUnavailable if it does not answer.
  absl::StatusOr<CacheClient::NodeHealth> NodeHealth(uint32_t id, int timeout_ms) const;
  // Resizes cache node `id`'s SSD and RAM tiers to `ssd_bytes` and `ram_bytes` (0: no change)
  // and says where the resize stands (CacheClient::ResizeTiers); kNotFound for an unknown id.
  absl::StatusOr<v1::ResizeTiersResponse> ResizeCacheNode(uint32_t id, uint64_t ssd_bytes,
                                                          uint64_t ram_bytes) const;
  // Cluster mode: the coordinator's term (coordinator/election.h), carried from now on by the
  // control steps this router sends — to cache nodes (DropBlocks, handoff flushes, relogs) and
  // to data nodes (log seals and reclaims) — so that nodes refuse them once a newer coordinator
  // spoke to them (docs/design.md, "Control steps are fenced"). Only grows; a router that lost
  // its term keeps sending the old one, which is what fences it.
  void SetControlTerm(uint64_t term);
  uint64_t control_term() const { return control_term_.load(); }
  // Returns every cache node id the router knows (from construction or learned), removed or not.
  std::vector<uint32_t> member_ids() const;

  // Creates the client of a learned cache node at `address` (default: MakeGrpcCacheClient).
  using ClientFactory =
      std::function<std::unique_ptr<CacheClient>(uint32_t id, const std::string& address)>;
  // Replaces the client factory. Call before LoadRemoved and LearnCacheNode (tests).
  void SetClientFactoryForTest(ClientFactory factory);
  // Cluster mode: makes cache node `id`, registered at `address` with ring weight `weight` but not
  // in the cluster file, a member that is out of the ring (as if removed), so that AddCacheNode
  // can bring it in with the same safe join as a returning node. Kept in `added_cache_nodes` (see
  // LoadRemoved), marked removed there first, so that a gateway restarted at any point neither
  // forgets it nor routes to it before its join. kAlreadyExists if the router knows `id`.
  absl::Status LearnCacheNode(uint32_t id, const std::string& address, double weight);
  // Returns the address of learned cache node `id`, or "" for a node of the cluster file or an
  // unknown one.
  std::string LearnedAddress(uint32_t id) const;

  // Brings removed cache node `id` back into the ring (cluster mode: it registered again, or a
  // new node registered). kUnavailable at once if the node does not answer a probe. Otherwise
  // a handoff of the objects it takes over: requests for them are held (those in flight finish
  // first) while every current member destages its dirty blocks of them (FlushMoving) and drops
  // its clean copies of them; requests for all other objects go on. The joining node drops every
  // block it had (they may be stale: it was out of the ring while others wrote); the VDIs are
  // registered on it; only then does the ring grow and the held requests go to it. On error
  // nothing changes (the node stays removed; dropped clean blocks are only a colder cache).
  absl::Status AddCacheNode(uint32_t id, const std::function<void(const std::string&)>& progress,
                            int attempts = 60);
  // Gives cache node `id` (in the ring) the ring weight `weight`, standing for `capacity_bytes`
  // of SSD tier (ringcachectl node resize: the weight follows the capacity). A handoff as for a
  // join, both ways: requests for the objects that move to or from the node are held (those in
  // flight finish first) while every member destages its dirty blocks of the objects it loses
  // and drops its clean copies of them; then the ring takes the weight. Only keys to or from
  // the node move (ring/ring.h). On error nothing changes. The weight is kept with the removals
  // (LoadRemoved) and, in cluster mode, in the published ring state.
  absl::Status ReweightCacheNode(uint32_t id, double weight, uint64_t capacity_bytes,
                                 const std::function<void(const std::string&)>& progress,
                                 int attempts = 30);
  // The ring weight of cache node `id` now and the SSD capacity it stands for: the weight a
  // reweight gave it, or (capacity 0) the one it registered with, which `registered` (may be
  // null) receives in any case. kNotFound for an unknown id.
  absl::StatusOr<CacheRingState::Weight> RingWeight(uint32_t id,
                                                    double* registered = nullptr) const;
  // Runs `hook(id, client)` on a joining cache node after its VDIs are registered and before it
  // serves (a failure fails the attempt, which is retried). The data rebalancer uses it to give
  // the node the current data ring. Set before serving.
  void SetJoinHook(std::function<absl::Status(uint32_t, CacheClient*)> hook);
  // Cluster mode with several gateways (membership/README.md "Control plane"). The leading
  // coordinator's router publishes its state before each change takes effect (`publisher`, set
  // while leading; empty otherwise): a removal or join first publishes, with a new epoch, which
  // requests must wait, settles, then publishes the new ring with another new epoch. A failed
  // publish fails the change before anything moved. The other gateways' routers follow the
  // published states (FollowRingState).
  using Publisher = std::function<absl::Status(const CacheRingState&)>;
  void SetPublisher(Publisher publisher);
  // Follows a state published by the coordinator: learns its nodes, takes its ring, its waiting
  // requests and its epoch. States with an epoch not above ring_epoch() are ignored (OK). Fails
  // (changing nothing) while this router runs a change itself or when a node cannot be learned.
  absl::Status FollowRingState(const CacheRingState& state);
  // Becoming the coordinator: forgets a change the previous leader left under way (its removal
  // is decided again from the membership; a join is retried), raises the epoch above both the
  // current one and `min_epoch`, and publishes. Requests held for that change go on.
  absl::Status TakeOver(uint64_t min_epoch);

  // The members that serve, plus a node being added (AddCacheNode) from the moment it is picked
  // until it serves or fails: whoever must follow a change of the data ring.
  std::vector<std::pair<uint32_t, CacheClient*>> ServingOrJoining() const;

 private:
  Router() = default;
  CacheClient* Client(uint32_t id) const;
  // The end of a call counted in inflight_ and inflight_objects_.
  void EndCallLocked(uint32_t owner, const ring::ObjectKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status OnMember(const v1::VdiGeometry& g, uint64_t object, CacheClient* c,
                        const std::function<absl::Status(CacheClient*)>& op);
  // Members not removed (their clients stay valid for the router's lifetime); with
  // `skip_removing`, not being removed either.
  std::vector<CacheMember*> Live(bool skip_removing = false) const;
  absl::Status RebuildRing() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The ring of the members not removed, plus `joining` (0: none); with `reweighted`, the
  // reweight under way (reweighting_) has taken effect.
  absl::StatusOr<std::unique_ptr<ring::Ring>> BuildRingLocked(uint32_t joining,
                                                              bool reweighted = false) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A member's ring weight: a reweight's (reweighting_ with `reweighted`, else weights_), or
  // `registered`.
  double WeightLocked(uint32_t id, double registered, bool reweighted) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  CacheMember* MemberLocked(uint32_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t RingEpochLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True while a node joins and `key` moves to it.
  bool MovesLocked(const ring::ObjectKey& key) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SaveRemoved() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  CacheRingState RingStateLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FollowRingState under mu_; `leaving` gets the members the state newly takes out.
  absl::Status FollowLocked(const CacheRingState& state,
                            std::vector<std::pair<uint32_t, CacheClient*>>* leaving);
  // A cache ring change (coordinator/ring_change.h) carried out: the core decides the steps,
  // the router takes them. `work` is the settle (removal) or the handoff (join) attempt.
  // `weight`: a reweight's.
  absl::Status RunChange(coordinator::RingChange::Kind kind, uint32_t id, int attempts,
                         const std::function<absl::Status(const coordinator::Step&)>& work,
                         const std::function<void(const std::string&)>& say,
                         CacheRingState::Weight weight = {});
  // Starts the change in the routing state (requests for the node, or for the objects that
  // move to or from it, wait from now on); fails with nothing changed when the core refuses it.
  absl::Status BeginChange(coordinator::RingChange::Kind kind, uint32_t id, int attempts,
                           CacheRingState::Weight weight,
                           std::optional<coordinator::RingChange>* change);
  void EndChangeLocked(coordinator::RingChange::Kind kind, uint32_t id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A change that succeeded and whose outcome was published takes effect here: the node out,
  // in, or at its new weight; the ring rebuilt and saved.
  absl::Status ApplyChangeLocked(const coordinator::RingChange& change,
                                 const std::function<void(const std::string&)>& say)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for the requests the change holds that are already in flight (a removal cancels those
  // of a node that does not answer).
  void Drain(coordinator::RingChange::Kind kind, uint32_t id,
             const std::function<void(const std::string&)>& say);
  // One handoff attempt of a join or reweight: members destage and drop what moves (to or from
  // node `id`); a `joiner` (null for a reweight) drops every block, gets the VDIs and the join
  // hook.
  absl::Status Handoff(uint32_t id, CacheClient* joiner,
                       const std::function<void(const std::string&)>& say);
  // True when a change must not be retried: a node refused its step as of an ended term
  // (kStaleTerm), or this router's term as coordinator ended (it lost its publisher).
  bool StepRefused(const absl::Status& s) const;
  // Publishes `state` (OK without a publisher); called without mu_. The rule that keeps
  // epochs safe across leaders: a router with a publisher never routes with an epoch it has not
  // published first, so a new leader that starts above the last published epoch is above every
  // epoch any cache node has seen.
  absl::Status Publish(const CacheRingState& state);
  // Publishes the outcome of a change, retrying while this router has a publisher (a leader
  // that loses its term loses its publisher, and a new leader takes over). True if published or
  // there is no publisher; false if the publisher went away first.
  bool PublishOutcome(const CacheRingState& state);

  Catalog* catalog_ = nullptr;
  std::unique_ptr<QosRegistry> qos_;
  datanode::DataNodePool* data_nodes_ = nullptr;
  absl::Status SaveLearned() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status LoadLearned(const std::string& path) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::unique_ptr<CacheClient> NewClient(uint32_t id, const std::string& address) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The series of calls to one cache node (ExportMetrics).
  struct CallMetrics {
    static constexpr int kCodes = 17;  // absl::StatusCode 0..16
    metrics::Histogram* seconds = nullptr;
    metrics::Counter* calls[kCodes] = {};
    metrics::Counter* retries[4] = {};  // by RetryReason
  };
  enum RetryReason { kRetryFenced, kRetryUnreachable, kRetryStaleEpoch, kRetryMoved };
  // Returns the series of node `id` (null before ExportMetrics).
  CallMetrics* CallMetricsLocked(uint32_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::atomic<uint64_t> control_term_{0};
  mutable absl::Mutex mu_;
  metrics::Registry* registry_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::flat_hash_map<uint32_t, std::unique_ptr<CallMetrics>> call_metrics_ ABSL_GUARDED_BY(mu_);
  // Only grows (LearnCacheNode): a deque keeps the members' addresses, which Live() hands out,
  // valid; see removed_ for who is in the ring.
  std::deque<CacheMember> members_ ABSL_GUARDED_BY(mu_);
  struct Learned {
    std::string address;
    double weight = 1.0;
  };
  std::map<uint32_t, Learned> learned_ ABSL_GUARDED_BY(mu_);  // members not from the file
  std::string learned_path_ ABSL_GUARDED_BY(mu_);
  ClientFactory client_factory_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ring::Ring> ring_ ABSL_GUARDED_BY(mu_);
  // The ring epoch (ring_epoch()): grows with every removal and join, and to each etcd
  // revision the membership follows (SetRingEpoch); kept in the removed file (LoadRemoved).
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_set<uint32_t> removed_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint32_t> removing_ ABSL_GUARDED_BY(mu_);
  // A RemoveCacheNode or AddCacheNode of this router runs: the ring is not followed meanwhile.
  bool changing_ ABSL_GUARDED_BY(mu_) = false;
  // A publisher was set once (cluster mode's coordinator): without one now its term ended.
  bool publishes_ ABSL_GUARDED_BY(mu_) = false;
  // A join or reweight is under way: requests for the objects that move wait (MovesLocked).
  bool joining_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t joining_id_ ABSL_GUARDED_BY(mu_) = 0;  // the joiner (0: a reweight)
  std::unique_ptr<ring::Ring> next_ring_ ABSL_GUARDED_BY(mu_);  // the ring after the change
  // Ring weights set by reweights (by node), and the reweight under way (id 0: none).
  absl::flat_hash_map<uint32_t, CacheRingState::Weight> weights_ ABSL_GUARDED_BY(mu_);
  CacheRingState::Weight reweighting_ ABSL_GUARDED_BY(mu_);
  // Requests in flight per object (vdi, object index): a join waits for those of moving objects.
  absl::flat_hash_map<std::pair<uint32_t, uint64_t>, int> inflight_objects_ ABSL_GUARDED_BY(mu_);
  std::function<absl::Status(uint32_t, CacheClient*)> join_hook_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, int> inflight_ ABSL_GUARDED_BY(mu_);
  std::string removed_path_ ABSL_GUARDED_BY(mu_);
  Publisher publisher_ ABSL_GUARDED_BY(mu_);
  absl::Mutex publish_mu_;  // one publish at a time, in order
};

}  // namespace ringcache::gateway

#endif  // RINGCACHE_GATEWAY_ROUTER_H_
