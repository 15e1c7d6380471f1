// MembershipSync: the gateway's side of cluster mode (docs/design.md §7). A MembershipWatcher
// follows the nodes registered in etcd; a reconciler thread makes the router's cache ring follow
// the registered cache nodes:
//  - a ring member whose registration disappeared (lease expired: killed, hung or cut off from
//    etcd; or revoked at shutdown) is removed with gateway::Router::RemoveCacheNode: its requests
//    wait while its dirty data is settled — destaged if it still answers (it is fenced: its lease
//    is gone, so it serves no I/O), replayed from its write-back log if not;
//  - a removed node that registers again rejoins with gateway::Router::AddCacheNode, unless it is
//  marked
//    drained (P/draining/<id>: `ringcachectl node remove|drain` in cluster mode writes it;
//    `ringcachectl node undrain` deletes it and nudges the reconciler, so the node rejoins;
//    deleting it by hand lets the node rejoin at the next membership change);
//  - a member that registered again under a new lease without any view lacking it (it
//    restarted, or lost and re-granted its lease, between two views) is removed and re-added,
//    since a node that lost its lease may have been replaced meanwhile.
// The epoch is the etcd revision of the last view the ring was brought in line with.
//
// A registered cache node that the cluster file does not list is learned from its NodeRecord
// (address, weight: gateway::Router::LearnCacheNode, kept in the gateway's state) and joins like a
// returning node; it keeps the address it joined at (a node of the file keeps the file's). Only
// the elected coordinator runs it (gateway/main.cc, membership/README.md "Control plane").
//
// Thread-safety: thread-safe; callbacks run on the reconciler thread.
#ifndef RINGCACHE_GATEWAY_MEMBERSHIP_SYNC_H_
#define RINGCACHE_GATEWAY_MEMBERSHIP_SYNC_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/member_decision.h"
#include "gateway/router.h"
#include "membership/membership.h"

namespace ringcache::coordinator {

class MembershipSync {
 public:
  struct Options {
    std::string prefix = std::string(membership::kDefaultPrefix);
    // Pause before reconciling again after a step failed (e.g. a replay while a data node is
    // down).
    absl::Duration retry_interval = absl::Seconds(1);
  };
  // Called after a cache node's state changed ("joining": learned, not in the ring yet; "up";
  // "removed") and after each epoch change.
  using StateCallback = std::function<void(uint32_t id, const std::string& state)>;
  using EpochCallback = std::function<void(uint64_t epoch)>;

  // Starts watching and reconciling. `client` and `router` are not owned and must outlive the
  // returned object.
  // Marks cache node `id` drained in etcd (see the file comment).
  static absl::Status MarkDrained(membership::EtcdClient* client, const std::string& prefix,
                                  uint32_t id);

  static std::unique_ptr<MembershipSync> Start(membership::EtcdClient* client,
                                               gateway::Router* router, Options options,
                                               StateCallback on_state, EpochCallback on_epoch);
  ~MembershipSync();  // stops the watcher, then the reconciler (after its current step)
  MembershipSync(const MembershipSync&) = delete;
  MembershipSync& operator=(const MembershipSync&) = delete;

  uint64_t epoch() const { return epoch_.load(); }
  // Reconciles the last view again soon (something outside the watched members changed: an
  // operator cleared a drained mark). No-op before the first view.
  void Nudge();

 private:
  MembershipSync(membership::EtcdClient* client, gateway::Router* router, Options options,
                 StateCallback on_state, EpochCallback on_epoch);
  void Loop();
  // Brings the ring in line with `view`; false if some step failed (retried later).
  bool Reconcile(const membership::MemberView& view);
  // Decides for one member (coordinator::DecideMember, asking for the facts it needs) and carries
  // the verdict out; a removal is followed by the decision on the node out of the ring (a node
  // still registered rejoins at once). False: try again at the next round.
  bool Apply(const membership::MemberView& view, coordinator::MemberFacts* facts);
  bool Remove(uint32_t id, const char* why);
  // Makes the router know every registered cache node that is not drained; false if one failed.
  bool Learn(const membership::MemberView& view);
  // Returns false (and says so once) if learned node `id` registered at another address than
  // the one it joined at.
  bool SameAddress(const membership::MemberView& view, uint32_t id);

  // Returns true if cache node `id` is marked drained (errors count as not drained).
  bool Drained(uint32_t id);

  membership::EtcdClient* const client_;
  gateway::Router* const router_;
  const Options options_;
  const StateCallback on_state_;
  const EpochCallback on_epoch_;
  std::atomic<uint64_t> epoch_{0};
  std::map<uint32_t, int64_t> accepted_lease_;  // reconciler thread only
  std::set<uint32_t> said_drained_;             // reconciler thread only (log once)
  std::set<uint32_t> said_moved_;               // reconciler thread only (log once)

  absl::Mutex mu_;
  std::optional<membership::MemberView> pending_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool nudged_ ABSL_GUARDED_BY(mu_) = false;

  std::thread thread_;
  std::unique_ptr<membership::MembershipWatcher> watcher_;
};

}  // namespace ringcache::coordinator

#endif  // RINGCACHE_GATEWAY_MEMBERSHIP_SYNC_H_
