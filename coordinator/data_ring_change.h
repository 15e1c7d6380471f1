// The data ring's transitions, as pure functions: no I/O, no clock, no locks. The data
// rebalancer (data_rebalancer.h) is their executor: it gathers the inputs (the current ring, the
// operator's actions, the data nodes registered), asks these functions for the next ring, and
// carries the steps between two rings out (clearing a joining node's store, copying replicas,
// publishing, purging). docs/rebalancing.md tells the whole story.
//
// One rebalance goes through up to three rings, each published with the epoch + 1:
//
//   members M            --RingWithNodesOut(outs)-->  M, out += outs, target = (target or M) - outs
//   (prepare)            --PlanDataRing(asks).prep--> M, out -= back in, target = M - leaving +
//   joining M, target T (copy)   --RingAfterCopy-->           members T, out += M - T (left, not
//   out yet)
//
// A ring with a target is mid-move: the rebalancer copies every replica to its home on the
// target ring, then switches (RingAfterCopy), then purges the replicas on former homes.
#ifndef RINGCACHE_COORDINATOR_DATA_RING_CHANGE_H_
#define RINGCACHE_COORDINATOR_DATA_RING_CHANGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "datanode/client/datanode_pool.h"

namespace ringcache::coordinator {

// Data nodes `outs` (members, due out) leave the I/O path at once, also in the middle of a move:
// they are listed out and dropped from the target, which starts from the members when no move
// is under way. kFailedPrecondition when no data node would be left.
absl::StatusOr<datanode::DataRing> RingWithNodesOut(const datanode::DataRing& cur,
                                                    const std::vector<uint32_t>& outs);

// The ring once every replica is on its home of `cur.target`: the target becomes the members;
// members that leave (out, or decommissioned and copied from) stay listed as out.
datanode::DataRing RingAfterCopy(const datanode::DataRing& cur);

// What is asked of the ring now.
struct DataRingAsks {
  std::vector<uint32_t> in;                        // `datanode in`, not known done
  std::vector<datanode::DataNodeEndpoint> wanted;  // registered / configured data nodes
  std::vector<uint32_t> decommission;              // `datanode decommission`, not done
};

// The next move, when the ring has no target (the previous move ended).
struct DataRingPlan {
  std::vector<datanode::DataNodeEndpoint> joining;  // wanted, not members, not out
  std::vector<uint32_t> leaving;                    // decommissioned members not out
  std::vector<uint32_t> back_in;                    // out nodes the operator put back in
  std::vector<uint32_t> in_done;                    // `in` asks the ring shows done: forget them
  datanode::DataRing prep;  // the ring to publish (meaningful unless idle())
  bool idle() const { return joining.empty() && leaving.empty() && back_in.empty(); }
  // "join", "decommission" or both, for the rebalancer's status.
  std::string reason() const;
};
DataRingPlan PlanDataRing(const datanode::DataRing& cur, const DataRingAsks& asks);

}  // namespace ringcache::coordinator

#endif  // RINGCACHE_COORDINATOR_DATA_RING_CHANGE_H_
