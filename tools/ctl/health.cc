#include "tools/ctl/health.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringcache::ctl {

std::string Health::Line() const {
  if (reasons.empty()) return level;
  return absl::StrCat(level, ": ", absl::StrJoin(reasons, "; "));
}

Health ClusterHealth(const v1::ClusterStatusResponse& status) {
  std::vector<std::string> errors, warnings;
  int cache_up = 0, cache_nodes = 0;
  for (const v1::NodeInfo& n : status.nodes()) {
    const std::string& state = n.state();
    if (state == "removed") continue;
    const std::string who =
        absl::StrCat(n.role() == "cachenode"  ? "cache node "
                     : n.role() == "datanode" ? "data node "
                                              : n.role() + " ",
                     n.id());
    if (n.role() == "cachenode") {
      ++cache_nodes;
      if (state == "up") ++cache_up;
    }
    if (state == "up") continue;
    if (state == "down") {
      errors.push_back(absl::StrCat(who, " down"));
    } else if (state == "failed") {
      errors.push_back(absl::StrCat(who, " failed (its SSD)"));
    } else {
      warnings.push_back(absl::StrCat(who, " ", state.empty() ? "in an unknown state" : state));
    }
  }
  if (cache_nodes > 0 && cache_up == 0) errors.insert(errors.begin(), "no cache node up");
  const v1::DataRebalance& r = status.rebalance();
  if (!r.state().empty() && r.state() != "idle") {
    warnings.push_back(absl::StrCat("data rebalance ", r.state(), " (", r.blocks_scanned(),
                                    " of ~", r.blocks_estimated(), " blocks scanned)"));
  }
  if (!r.message().empty()) warnings.push_back(absl::StrCat("rebalance: ", r.message()));
  Health h;
  h.level = !errors.empty() ? "ERR" : !warnings.empty() ? "WARN" : "OK";
  h.reasons = std::move(errors);
  h.reasons.insert(h.reasons.end(), warnings.begin(), warnings.end());
  return h;
}

}  // namespace ringcache::ctl
