// Log replay: what the cluster does when a cache node is lost (docs/design.md §7, paper 002
// §III-G). The data nodes holding the lost node's write-back log records are scanned, the newest
// record of each block wins (by ownership epoch, then sequence), and it is written to the
// block's N home replicas as a conditional write that never replaces a home copy at least as
// new (the version stamps of datanode/store.h): a record older than a destage, write-around or
// trim the node made before it died changes nothing. Then every record of the node is dropped.
//
// A cache node on a new SSD replays its own old incarnation's log this way before it serves
// (docs/durability.md, "Incarnations").
//
// REQUIRES: the cache node is dead or fenced, and no other cache node serves its objects until
// the replay returned OK (the gateway's router holds their requests meanwhile).
//
// A record copy that fails its checksum is skipped for another copy of the same record; a record
// with no good copy is reported (log, ReplayStats::records_lost) and the replay goes on.
//
// Every data node must answer the scan: a record's copies may all sit on one that does not, so a
// replay with a data node unreachable fails with kUnavailable and is retried by the caller.
// Memory: the lost node's log records are held in memory during the replay (bounded by its dirty
// data; fine for cache nodes of a few GiB of dirty data, see docs/durability.md).
//
// Thread-safety: a free function; concurrent replays of different cache nodes are safe.
#ifndef RINGCACHE_DATANODE_CLIENT_LOG_REPLAY_H_
#define RINGCACHE_DATANODE_CLIENT_LOG_REPLAY_H_

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "datanode/client/datanode_pool.h"

namespace ringcache::datanode {

struct ReplayStats {
  uint64_t records = 0;         // record copies scanned
  uint64_t blocks = 0;          // distinct blocks with a record
  uint64_t blocks_written = 0;  // of which newer than their home copy (written home)
  uint64_t blocks_skipped = 0;  // of which the home copy was already as new
  uint64_t blocks_orphaned = 0; // of which belong to a VDI that no longer exists
  uint64_t damaged_copies = 0;  // record copies that failed their checksum, another copy good
  uint64_t records_lost = 0;    // records with no good copy (reported; the replay goes on)
};

// Replays the log of cache node `cache_node`. `replication` returns a VDI's N, or 0 if the VDI
// no longer exists (its records are dropped). `pool` is not owned.
//
// With `seal_epoch` (the cache ring epoch at which the node's objects are taken from it), the
// node's log is first sealed on every data node (DataNodePool::SealLog): a node that is cut off
// but alive can no longer add a record of an older epoch, so a write whose log copies were not
// yet durable when the scan ran is refused (its client retries on the new owner) instead of
// acknowledged and missed. 0: no seal (a node replaying its own old incarnation's log).
absl::StatusOr<ReplayStats> ReplayCacheNodeLog(
    DataNodePool* pool, uint32_t cache_node,
    const std::function<uint32_t(uint32_t vdi)>& replication, uint64_t seal_epoch = 0);

}  // namespace ringcache::datanode

#endif  // RINGCACHE_DATANODE_CLIENT_LOG_REPLAY_H_
