// `ringcachectl restore DIR`: after etcd was brought back from a backup's snapshot (`etcdctl
// snapshot restore DIR/etcd.db ...`), repairs what the cluster did after the backup so that no
// node refuses the coordinator and nothing is served stale (docs/upgrades.md, "Backup and
// restore").
//
// The snapshot is older than what the nodes know. The data and cache nodes keep, on their own
// disks: the VDIs the data nodes were given (every create and resize reaches every data node),
// the newest data ring the coordinator gave them, the highest cache ring epoch each cache node
// saw and the highest coordinator term any control step carried. `restore` asks every node it
// can find (in etcd's rings and registrations) and raises etcd to them:
//   - the data ring: a data node's copy newer than etcd's replaces it (a rebalance or a node
//     taken out after the backup);
//   - the cache ring's epoch: above every cache node's, so the nodes take the ring etcd holds
//     (fencing tokens are ordered by epoch: an older one would make their writes lose);
//   - etcd's revision, which is the coordinator's term (coordinator/election.h): above every
//     term the nodes saw, by writes of one scratch key (etcd 3.4 has no other way);
//   - the catalog: a VDI the data nodes know and etcd does not (created after the backup) is
//     added back with its geometry, a larger size from the data nodes wins (resized after), a
//     VDI no data node knows while all of them answered is removed (deleted after the backup:
//     its data is gone), and the next VDI id passes every id seen, so an id is never reused.
// While it works, the key P/cluster/restoring keeps any gateway from being elected coordinator;
// it is removed at the end. A failure leaves it in place (run `restore` again).
//
// Thread-compatible.
#ifndef RINGCACHE_TOOLS_CTL_RESTORE_H_
#define RINGCACHE_TOOLS_CTL_RESTORE_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "membership/etcd_client.h"

namespace ringcache::ctl {

struct RestoreOptions {
  std::string dir;     // the backup (its manifest is checked and named in the report)
  std::string prefix;  // the cluster's key prefix
  bool dry_run = false;
  absl::Duration node_timeout = absl::Seconds(10);  // per node question
};

// Prints what it found and changed on `out`, warnings on `err`.
absl::Status Restore(membership::EtcdClient* etcd, const RestoreOptions& options,
                     std::ostream* out, std::ostream* err);

}  // namespace ringcache::ctl

#endif  // RINGCACHE_TOOLS_CTL_RESTORE_H_
