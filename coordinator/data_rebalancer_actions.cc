// The operator's data node actions (`datanode out|in|decommission`, data_rebalancer.h): their
// text form, recorded before they are answered, tidied once the ring shows them done.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "coordinator/data_rebalancer.h"

namespace ringcache::coordinator {

using datanode::DataNodeEndpoint;
using datanode::DataRing;

void DataRebalancer::TidyActions(const DataRing& ring) {
  absl::MutexLock al(&actions_mu_);
  {
    absl::MutexLock l(&mu_);
    // Done already (a predecessor published the ring, then died before it saved the actions):
    // an "out" or "decommission" left here would take the node out again after a later "in".
    const size_t before = asks_.out.size() + asks_.decommission.size();
    for (auto* asks : {&asks_.out, &asks_.decommission}) {
      for (auto it = asks->begin(); it != asks->end();) {
        if (ring.IsOut(*it)) {
          asks->erase(it++);
        } else {
          ++it;
        }
      }
    }
    if (asks_.out.size() + asks_.decommission.size() != before) actions_dirty_ = true;
    if (!actions_dirty_) return;
  }
  if (absl::Status s = SaveActions(); !s.ok()) {
    spdlog::warn("data rebalance: cannot record which operator actions are done (retried): {}",
                 s.ToString());
  }
}

absl::StatusOr<std::string> DataRebalancer::Action(uint32_t id, const std::string& action) {
  absl::MutexLock al(&actions_mu_);
  DataActions before;
  {
    absl::MutexLock l(&mu_);
    before = asks_;
  }
  absl::StatusOr<std::string> answer = ActionLocked(id, action);
  if (!answer.ok()) return answer;
  {
    absl::MutexLock l(&mu_);
    if (before == asks_) return answer;
  }
  if (absl::Status s = SaveActions(); !s.ok()) {
    absl::MutexLock l(&mu_);
    asks_ = std::move(before);
    return absl::UnavailableError(absl::StrCat(
        "data node ", id, ": the action could not be recorded, so it is not carried out (",
        s.message(), "); ask again"));
  }
  return answer;
}

absl::StatusOr<std::string> DataRebalancer::ActionLocked(uint32_t id, const std::string& action) {
  const DataRing ring = pool_->ring();
  const bool member = std::find(ring.members.begin(), ring.members.end(), id) != ring.members.end();
  size_t live = 0;
  for (uint32_t m : ring.members) {
    if (!ring.IsOut(m)) ++live;
  }
  absl::MutexLock l(&mu_);
  const bool known = member || std::any_of(wanted_.begin(), wanted_.end(),
                                           [id](const DataNodeEndpoint& e) { return e.id == id; });
  if (!known && !ring.IsOut(id)) {
    return absl::NotFoundError(absl::StrCat("no data node ", id, " in the data ring"));
  }
  const int replication = MaxReplication();
  if (action == "out") {
    if (ring.IsOut(id)) return absl::StrCat("data node ", id, " is out already");
    if (!member)
      return absl::FailedPreconditionError(
          absl::StrCat("data node ", id, " is not a member of the data ring yet (it is joining)"));
    if (live <= 1) return absl::FailedPreconditionError("the last data node cannot go out");
    asks_.out.insert(id);
    idle_ = false;
    std::string msg =
        absl::StrCat("data node ", id,
                     " goes out: no I/O goes there any more and its replicas are "
                     "made again on the other data nodes (see `ringcachectl status`)");
    if (static_cast<int>(live) - 1 < replication) {
      absl::StrAppend(&msg, "; only ", live - 1, " data nodes are left for VDIs of replication ",
                      replication, ": they keep ", live - 1, " copies until a node joins");
    }
    return msg;
  }
  if (action == "in") {
    if (!ring.IsOut(id))
      return absl::FailedPreconditionError(absl::StrCat("data node ", id, " is not out"));
    if (member)
      return absl::FailedPreconditionError(absl::StrCat(
          "data node ", id, " is still leaving the ring: put it in once the move ends"));
    asks_.in.insert(id);
    idle_ = false;
    return absl::StrCat("data node ", id,
                        " is in again: it joins as a new node (its store is cleared) once it "
                        "is registered and answers");
  }
  if (action == "decommission") {
    if (ring.IsOut(id))
      return absl::FailedPreconditionError(absl::StrCat(
          "data node ", id, " is out: its replicas are made again from the others already"));
    if (!member)
      return absl::FailedPreconditionError(
          absl::StrCat("data node ", id, " is not a member of the data ring"));
    if (static_cast<int>(live) - 1 < replication) {
      return absl::FailedPreconditionError(absl::StrCat(
          "decommissioning data node ", id, " would leave ", live - 1,
          " data nodes for VDIs of replication ", replication, ": add a data node first"));
    }
    asks_.decommission.insert(id);
    idle_ = false;
    return absl::StrCat("data node ", id,
                        " is decommissioned: its replicas move to the other data nodes, then it "
                        "leaves the ring (see `ringcachectl status`); stop it afterwards");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown data node action '", action, "' (out, in or decommission)"));
}

}  // namespace ringcache::coordinator
