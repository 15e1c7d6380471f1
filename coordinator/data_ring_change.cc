// The data ring's transitions: see data_ring_change.h.
#include "coordinator/data_ring_change.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringcache::coordinator {
namespace {

using datanode::DataNodeEndpoint;
using datanode::DataRing;

bool Contains(const std::vector<uint32_t>& ids, uint32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

absl::StatusOr<DataRing> RingWithNodesOut(const DataRing& cur, const std::vector<uint32_t>& outs) {
  DataRing next = cur;
  next.epoch = cur.epoch + 1;
  next.target = cur.target.empty() ? cur.members : cur.target;
  for (uint32_t id : outs) {
    if (!next.IsOut(id)) next.out.push_back(id);
    std::erase(next.target, id);
  }
  if (next.target.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data nodes ", absl::StrJoin(outs, ","), " cannot go out: no data node would be left"));
  }
  return next;
}

DataRing RingAfterCopy(const DataRing& cur) {
  DataRing next;
  next.epoch = cur.epoch + 1;
  next.nodes = cur.Endpoints(cur.target);
  next.members = cur.target;
  next.out = cur.out;
  for (uint32_t id : cur.members) {
    if (!Contains(cur.target, id) && !cur.IsOut(id)) next.out.push_back(id);
  }
  return next;
}

std::string DataRingPlan::reason() const {
  std::vector<std::string> why;
  if (!joining.empty()) why.push_back("join");
  if (!leaving.empty()) why.push_back("decommission");
  return absl::StrJoin(why, ",");
}

DataRingPlan PlanDataRing(const DataRing& cur, const DataRingAsks& asks) {
  DataRingPlan plan;
  // An `in` is kept until the ring shows the node no longer out (a joining node that does not
  // answer yet is asked again at the next pass).
  for (uint32_t id : asks.in) (cur.IsOut(id) ? plan.back_in : plan.in_done).push_back(id);
  for (const DataNodeEndpoint& w : asks.wanted) {
    const bool out = cur.IsOut(w.id) && !Contains(plan.back_in, w.id);
    if (!out && !Contains(asks.decommission, w.id) && !Contains(cur.members, w.id)) {
      plan.joining.push_back(w);
    }
  }
  for (uint32_t id : asks.decommission) {
    if (Contains(cur.members, id) && !cur.IsOut(id)) plan.leaving.push_back(id);
  }
  if (plan.idle()) return plan;
  plan.prep = cur;
  plan.prep.epoch = cur.epoch + 1;
  for (uint32_t id : plan.back_in) std::erase(plan.prep.out, id);
  if (!plan.joining.empty() || !plan.leaving.empty()) {
    plan.prep.target = cur.members;
    for (uint32_t id : plan.leaving) std::erase(plan.prep.target, id);
  }
  for (const DataNodeEndpoint& j : plan.joining) {
    std::erase_if(plan.prep.nodes, [&j](const DataNodeEndpoint& e) { return e.id == j.id; });
    plan.prep.nodes.push_back(j);
    plan.prep.target.push_back(j.id);
  }
  return plan;
}

}  // namespace ringcache::coordinator
