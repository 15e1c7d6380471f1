// DataRebalancer: moves home replicas to their new data nodes when the data ring changes (a data
// node joined; issue 5, docs/design.md §7), without a read ever missing a block or seeing a stale
// one.
//
// The gateway owns the data ring: its epoch, members and (while moving) target live in
// <gateway dir>/data_ring, and every cache node gets each change through SetDataRing before the
// next step starts. A rebalance from members M to target T runs in four steps:
//  1. preparing — the ring becomes (M, T): reads still go to the homes on M's ring, writes and
//     trims go to the homes on both. The VDIs are registered on the new nodes first. Every cache
//     node (and the gateway's own pool, used for log replay) must confirm it; a confirmation
//     means no request of that node still uses the previous ring.
//  2. copying — each block is copied from its first reachable home on M to each of its homes on
//     T that M's ring did not have, with only_if_absent: a write or trim that reached the new
//     home first (they all go there since step 1) is never overwritten by the copy. Copies
//     before deletions: nothing is removed yet.
//  3. switching — the ring becomes (T): reads and writes use T's homes, which now hold every
//     block (copied, or written there since step 1). Again every node confirms.
//  4. deleting — every member of T drops (purges) the blocks and tombstones it no longer homes.
// A step that fails (a node unreachable) is retried; a gateway restart resumes from the saved
// ring (steps are idempotent).
//
// Data nodes leave the same way (docs/durability.md, "A data node that never comes back"):
//  - out: a member down longer than `down_out` (or named by `ringcachectl datanode out`) joins
//    the ring's out list at once, even in the middle of a move: no read, write or log record
//    goes there any more (destage goes on with the other homes), and the target becomes the
//    members without it, so the copy makes its replicas again from the surviving copies;
//  - decommission: the target is the members without the node while it still serves; the copy
//    reads from it too, and it joins the out list at the switch. Refused when fewer data nodes
//    than a VDI's replication would be left;
//  - in: an out node leaves the list; it joins again as a new node, its stale store cleared
//    first (every node is cleared before it joins).
// Nodes that are out stay out across restarts and coordinator changes (the list is part of the
// saved ring) until put back in.
//
// Thread-safety: thread-safe; the work runs on one background thread.
#ifndef RINGCACHE_GATEWAY_DATA_REBALANCER_H_
#define RINGCACHE_GATEWAY_DATA_REBALANCER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/copy_pacer.h"
#include "coordinator/data_ring_change.h"
#include "coordinator/etcd_state.h"
#include "coordinator/scrub_repair.h"
#include "datanode/client/datanode_pool.h"
#include "gateway/router.h"
#include "membership/membership.h"
#include "ringcache/v1/admin.pb.h"

namespace ringcache::coordinator {

class DataRebalancer {
 public:
  struct Options {
    std::string state_path;   // the saved data ring; "" keeps it in memory only (tests)
    uint32_t scan_page = 64;  // blocks per scan page (with data)
    absl::Duration retry_interval = absl::Seconds(1);
    // Tests: runs after each page of the copy scan, before its blocks are copied (to write or
    // trim blocks in between, as a client may).
    std::function<void(const std::vector<v1::ScannedBlock>&)> after_scan_for_test;
    // Cluster mode: also keeps each ring there (etcd, coordinator/etcd_state.h), before any cache
    // node is given it.
    std::function<absl::Status(const datanode::DataRing&)> save_ring;
    // Cluster mode: keeps the purge mark there too (set before the switch, cleared after the
    // purge), so a coordinator taking over finishes a purge its predecessor left; and whether
    // the mark was found at the start.
    std::function<absl::Status(bool pending)> save_purge;
    bool purge_pending = false;
    // Cluster mode: keeps the operator's actions not carried out yet there (`datanode
    // out|in|decommission`), so that a coordinator taking over carries out what its
    // predecessor accepted; and what was found at the start. Static mode keeps them in
    // <state_path>.actions (EncodeDataActions).
    std::function<absl::Status(const DataActions& actions)> save_actions;
    DataActions actions;
    // How often an idle rebalancer checks the data nodes for a lost store (Heal).
    absl::Duration heal_interval = absl::Seconds(2);
    // Speed of copies (a join, an out node's replicas made again, a refill from the other
    // replicas): MB/s of block data written; 0: unthrottled. While the data nodes serve clients
    // the copies go at busy_mb_s instead (coordinator/copy_pacer.h; 0: refill_mb_s throughout).
    double refill_mb_s = 64;
    double busy_mb_s = 16;
    // A member unreachable this long is taken out of the ring (like Ceph's down-out interval);
    // zero: only `datanode out` takes nodes out.
    absl::Duration down_out = absl::Minutes(10);
    // How often an idle rebalancer collects the data nodes' scrub findings and repairs them
    // (coordinator/scrub_repair.h).
    absl::Duration scrub_poll = absl::Seconds(10);
    // The time of the down-out interval, the scrub polls, the copies' pace and the scrub's
    // re-handing of damaged records; null: the real clock. Tests pass a SimulatedClock and
    // drive minutes of down-out in milliseconds (the loop's own waits stay short real waits).
    Clock* clock = nullptr;
  };

  // Starts the background thread. `router` and `pool` (the gateway's own data node pool, whose
  // ring is the saved one) are not owned and must outlive the rebalancer. Resumes a rebalance
  // that a restart interrupted, and gives every serving cache node the current ring.
  static std::unique_ptr<DataRebalancer> Start(gateway::Router* router,
                                               datanode::DataNodePool* pool, Options options);
  ~DataRebalancer();  // stops after the current page
  DataRebalancer(const DataRebalancer&) = delete;
  DataRebalancer& operator=(const DataRebalancer&) = delete;

  // Asks for these data nodes to be ring members (in addition to the current ones).
  void Add(const std::vector<datanode::DataNodeEndpoint>& nodes);
  // Cluster mode: adds every data node that registers under `prefix` in etcd. `client` is not
  // owned and must outlive the rebalancer.
  void FollowEtcd(membership::EtcdClient* client, const std::string& prefix);
  // Gives a joining cache node the current data ring (gateway::Router::SetJoinHook).
  absl::Status OnJoin(uint32_t id, gateway::CacheClient* client);

  // Operator actions (`ringcachectl datanode out|in|decommission`): "out", "in" or
  // "decommission" data node `id`. Checks the action against the current ring, records it
  // (Options::save_actions or the state file: an error if it cannot, and then nothing is
  // asked) and returns what happens next; the rebalancer carries it out in the background
  // (see `status`), also after a restart or a coordinator change.
  absl::StatusOr<std::string> Action(uint32_t id, const std::string& action);

  v1::DataRebalance Status() const;
  // The scrub (`ringcachectl scrub status|start`): polls the data nodes now and repairs.
  v1::ClusterScrubStatus Scrub(bool start) { return scrub_.Poll(start); }
  v1::ClusterScrubStatus LastScrub() const { return scrub_.Last(); }
  // Returns true once nothing is to be moved, false if `timeout` passed first.
  bool WaitIdle(absl::Duration timeout) const;

 private:
  DataRebalancer(gateway::Router* router, datanode::DataNodePool* pool, Options options);
  void Loop();
  // One pass: finishes an interrupted rebalance, then moves to the wanted members if they
  // differ from the ring's.
  absl::Status Step();
  // Step's parts, in order (the rings come from coordinator/data_ring_change.h): take the nodes
  // due out out of the ring; copy to the target and switch; purge the former homes; prepare the
  // next move (or go idle).
  absl::Status TakeOut(datanode::DataRing* cur);
  absl::Status CopyAndSwitch(datanode::DataRing* cur);
  absl::Status FinishPurge(const datanode::DataRing& cur);
  absl::Status Prepare(const datanode::DataRing& cur);
  void ResetCountsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetIdleLocked(const datanode::DataRing& cur) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Switches the gateway's pool, saves the ring, and has every cache node confirm it.
  absl::Status Publish(const datanode::DataRing& ring);
  absl::Status Copy(const datanode::DataRing& ring);
  // Copy's sources: the members down or out (no source), and for each other member the VDIs it
  // is incomplete for (no source for those). Also starts the copy's status.
  struct CopySources {
    absl::flat_hash_set<uint32_t> down;
    absl::flat_hash_map<uint32_t, absl::flat_hash_set<uint32_t>> incomplete;
  };
  absl::StatusOr<CopySources> FindCopySources(const datanode::DataRing& ring);
  // One page of the copy scan done: `scanned` blocks, `copied` of them stored.
  void NoteCopied(size_t scanned, uint64_t copied);
  absl::Status Purge(const datanode::DataRing& ring);
  absl::Status RegisterVdis();
  // Gives data node `node` (new, or back with a wiped store) the log seals the other members
  // of `ring` hold, for every cache node the router knows, before it is given any VDI: it takes
  // no log record before (LogAppend needs the VDI), so a cache node cut off at an older epoch
  // can never log a write there that its sealed peers would refuse (docs/durability.md).
  absl::Status CarrySeals(const datanode::DataRing& ring, uint32_t node);
  // Records the operator actions not carried out yet (ask_*). Called with actions_mu_ held,
  // after ask_* changed.
  absl::Status SaveActions() ABSL_EXCLUSIVE_LOCKS_REQUIRED(actions_mu_);
  // Drops the actions `ring` shows done, and saves them if a pass of Step carried some out
  // since the last save (or a save failed).
  void TidyActions(const datanode::DataRing& ring);
  absl::StatusOr<std::string> ActionLocked(uint32_t id, const std::string& action)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(actions_mu_);
  // Members to take out now: asked for by the operator, or down longer than down_out while most
  // of the other members answer (a gateway cut off from the data nodes takes none out).
  std::vector<uint32_t> DueOut(const datanode::DataRing& ring);
  // The highest replication of any catalogued VDI.
  int MaxReplication() const;
  // A data node that lost its store (docs/durability.md, "Absent is not zero"): every member
  // that misses a catalogued VDI learns it again, incomplete for it (its "absent" answers are
  // not trusted), and every member incomplete for a VDI is refilled from the other replicas
  // (copies that never replace a newer write or trim), then marked complete. Needs every other
  // member up (a block's only other copy may sit on one that is down); retried otherwise.
  absl::Status Heal();
  absl::Status Refill(const datanode::DataRing& ring, uint32_t node,
                      const absl::flat_hash_set<uint32_t>& vdis);
  // Replication of every catalogued VDI, by VDI id.
  absl::flat_hash_map<uint32_t, int> Replications() const;
  // Calls `on_page` for each page of data node `node`'s blocks, in key order.
  absl::Status ScanNode(
      uint32_t node, uint32_t page_size, bool with_data,
      const std::function<absl::Status(const std::vector<v1::ScannedBlock>&)>& on_page);
  void SetState(const std::string& state, const std::string& message = "");
  // Waits until `bytes` copied since `start` are within the pace (coordinator/copy_pacer.h), or
  // the rebalancer stops. Called from the rebalancer's thread only.
  void Throttle(absl::Time start, uint64_t bytes);
  bool Stopping() const;

  gateway::Router* const router_;
  datanode::DataNodePool* const pool_;
  const Options options_;

  mutable absl::Mutex mu_;
  std::vector<datanode::DataNodeEndpoint> wanted_ ABSL_GUARDED_BY(mu_);
  // Operator actions not carried out yet (Action). Changed with actions_mu_ held too, which
  // orders their saves.
  absl::Mutex actions_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  DataActions asks_ ABSL_GUARDED_BY(mu_);
  bool actions_dirty_ ABSL_GUARDED_BY(mu_) = false;  // ask_* changed since their last save
  absl::Time copy_started_ ABSL_GUARDED_BY(mu_);
  bool purge_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool idle_ ABSL_GUARDED_BY(mu_) = false;
  v1::DataRebalance status_ ABSL_GUARDED_BY(mu_);

  // Held while a ring is given to cache nodes, so a joining node and a change never cross.
  absl::Mutex publish_mu_;

  Clock* const clock_;  // options_.clock, or the real one
  // When each member was first seen down in this term (DueOut; rebalancer thread only).
  absl::flat_hash_map<uint32_t, absl::Time> down_since_;

  ScrubRepair scrub_;
  absl::Time last_scrub_poll_ = absl::InfinitePast();  // rebalancer thread only
  // The copies' pace (rebalancer thread only): the bytes of the copy started at paced_start_
  // already paced.
  CopyPacer pacer_;
  absl::Time paced_start_ = absl::InfinitePast();
  uint64_t paced_bytes_ = 0;

  std::thread thread_;
  std::unique_ptr<membership::MembershipWatcher> watcher_;
};

}  // namespace ringcache::coordinator

#endif  // RINGCACHE_GATEWAY_DATA_REBALANCER_H_
