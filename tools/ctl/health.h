// The one-line health verdict `ringcachectl status` opens with (like `ceph -s`): OK, WARN or ERR
// and the reasons, computed from the gateway's ClusterStatus answer.
//   ERR   a node is down, a cache node's SSD failed, or no cache node is up;
//   WARN  a cache node is quarantined (lost ownership, waits to be re-admitted), a node is in
//         any other state but up (configured, draining...), or a data rebalance is under way or
//         reported a problem;
//   OK    otherwise. Removed nodes do not count.
#ifndef RINGCACHE_TOOLS_CTL_HEALTH_H_
#define RINGCACHE_TOOLS_CTL_HEALTH_H_

#include <string>
#include <vector>

#include "ringcache/v1/admin.pb.h"

namespace ringcache::ctl {

struct Health {
  std::string level;                 // "OK", "WARN" or "ERR"
  std::vector<std::string> reasons;  // worst first
  // "OK", or "ERR: cache node 2 down; data node 3 down".
  std::string Line() const;
};

Health ClusterHealth(const v1::ClusterStatusResponse& status);

}  // namespace ringcache::ctl

#endif  // RINGCACHE_TOOLS_CTL_HEALTH_H_
