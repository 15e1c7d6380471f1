// ScrubRepair: the coordinator's half of the scrub (docs/durability.md, "Rotten bytes"). Each
// data node scrubs its own store in the background (datanode/scrubber.h) and lists the damaged
// copies it found; a poll here collects the lists and repairs:
//  - a damaged block copy is rewritten from the newest good copy on another of its homes,
//    keeping that copy's version (a leftover copy off its homes is dropped). When no other home
//    holds a good copy the block has none left: it reads as an I/O error, never as older data,
//    and its VDI is listed as damaged (status and metrics) until the copy is gone;
//  - a damaged log record copy: its cache node logs the block again (a new record on healthy
//    data nodes, the old one retired everywhere), or, when the block is no longer dirty under
//    that record, the obsolete record is reclaimed. A cache node that is not serving is left
//    alone: replay skips a damaged copy for a good one.
//
// Thread-safety: thread-safe (polls are serialised).
#ifndef RINGCACHE_GATEWAY_SCRUB_REPAIR_H_
#define RINGCACHE_GATEWAY_SCRUB_REPAIR_H_

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "datanode/client/datanode_pool.h"
#include "gateway/router.h"
#include "ringcache/v1/admin.pb.h"

namespace ringcache::coordinator {

class ScrubRepair {
 public:
  // `router`, `pool` and `clock` are not owned and must outlive this.
  ScrubRepair(gateway::Router* router, datanode::DataNodePool* pool, Clock* clock)
      : router_(router), pool_(pool), clock_(clock) {}

  // Asks every live data node for its scrub report (`start`: begin a pass now), repairs what
  // they list, and returns the cluster's scrub status.
  v1::ClusterScrubStatus Poll(bool start);
  // The status of the last poll.
  v1::ClusterScrubStatus Last() const;

 private:
  // What one poll did.
  struct Tally {
    uint64_t repaired = 0, relogged = 0, unrepairable = 0;
    std::set<std::string> damaged;  // VDIs with a block no replica holds a good copy of
    std::string problem;            // the first error
    void Note(const absl::Status& s);
  };
  // Rewrites a damaged block copy on data node `node` from a good replica.
  void RepairBlock(uint32_t node, const v1::ScrubFinding& f, const VdiRecord& vdi, Tally* tally);
  // Has cache node `cache_node` log again the blocks of its records `seqs`, damaged on `node`.
  void RelogRecords(uint32_t node, uint32_t cache_node, const std::vector<uint64_t>& seqs,
                    gateway::CacheClient* client, Tally* tally)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);

  gateway::Router* const router_;
  datanode::DataNodePool* const pool_;
  Clock* const clock_;
  absl::Mutex poll_mu_;  // one poll at a time
  mutable absl::Mutex mu_;
  v1::ClusterScrubStatus last_ ABSL_GUARDED_BY(mu_);
  uint64_t blocks_repaired_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t log_records_relogged_ ABSL_GUARDED_BY(mu_) = 0;
  // Damaged records already handed to their cache node, as (cache node, sequence), with when:
  // the old copy is retired in the background, so a later report may still list it. Kept while
  // listed; one still listed kRehandAfter later is handed again (a retire that missed the node:
  // the cache node then finds it obsolete and it is reclaimed here).
  static constexpr absl::Duration kRehandAfter = absl::Seconds(10);
  absl::flat_hash_map<std::pair<uint32_t, uint64_t>, absl::Time> handled_
      ABSL_GUARDED_BY(poll_mu_);
};

}  // namespace ringcache::coordinator

#endif  // RINGCACHE_GATEWAY_SCRUB_REPAIR_H_
