// DecideMember: the coordinator's membership decision for one cache node, pure (no I/O): from
// what etcd and the node say, whether it stays, leaves, joins, stays out, or whether its health
// must be asked first. The coordinator's membership follower (coordinator/membership_sync.h)
// gathers the facts and carries the verdict out (a removal or join is a RingChange, ring_change.h);
// the control plane simulation (sim/) runs the same function.
//
// Rules:
//   - not registered (its lease expired or was revoked) and in the ring: it leaves;
//   - in the ring, first sight (no lease accepted yet): the member stays unless it says it is
//     quarantined — it lost its objects while no coordinator watched — then it leaves (and
//     rejoins like any returning node); its health is asked first;
//   - in the ring under another lease than the one accepted: it restarted or lost its lease in
//     between, so it leaves;
//   - out of the ring and registered: it joins, unless the operator drained it or it registered
//     at another address than the one it joined at (it stays out, said once).
//
// Thread-safety: a pure function.
#ifndef RINGCACHE_COORDINATOR_MEMBER_DECISION_H_
#define RINGCACHE_COORDINATOR_MEMBER_DECISION_H_

#include <cstdint>
#include <optional>
#include <string>

namespace ringcache::coordinator {

struct MemberFacts {
  uint32_t id = 0;
  int64_t lease = 0;                // its registration's lease in etcd (0: not registered)
  bool in_ring = false;             // a member that is not removed
  std::optional<int64_t> accepted;  // the lease it was accepted under (this coordinator)
  std::optional<bool> quarantined;  // its own word, asked under `lease` (nullopt: not asked)
  bool drained = false;             // marked drained by the operator
  bool address_moved = false;       // registered at another address than it joined at
};

struct MemberVerdict {
  enum Kind { kNothing, kAccept, kAskHealth, kRemove, kJoin, kStayOut };
  Kind kind = kNothing;
  std::string why;  // kRemove, kStayOut: for the log
};

MemberVerdict DecideMember(const MemberFacts& facts);

}  // namespace ringcache::coordinator

#endif  // RINGCACHE_COORDINATOR_MEMBER_DECISION_H_
