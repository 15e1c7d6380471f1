// The coordinator's membership decision for one cache node (member_decision.h).
#include "coordinator/member_decision.h"

namespace ringcache::coordinator {

MemberVerdict DecideMember(const MemberFacts& f) {
  if (f.lease == 0) {
    if (f.in_ring) return {MemberVerdict::kRemove, "registration gone (lease expired or revoked)"};
    return {};
  }
  if (f.in_ring) {
    if (!f.accepted.has_value()) {
      if (!f.quarantined.has_value()) return {MemberVerdict::kAskHealth, ""};
      if (!*f.quarantined) return {MemberVerdict::kAccept, ""};
      return {MemberVerdict::kRemove, "quarantined (it lost ownership while no gateway watched)"};
    }
    if (*f.accepted == f.lease) return {};
    return {MemberVerdict::kRemove, "registered again under a new lease"};
  }
  if (f.drained) return {MemberVerdict::kStayOut, "registered but marked drained"};
  if (f.address_moved) return {MemberVerdict::kStayOut, "registered at another address"};
  return {MemberVerdict::kJoin, ""};
}

}  // namespace ringcache::coordinator
