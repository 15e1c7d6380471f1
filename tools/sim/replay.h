// ringcache-sim replay: replays a trace against a live ringcache over NBD (libnbd), so that the
// live cache's hit ratio and SSD writes can be set beside the simulator's prediction for the same
// trace and policy (docs/experiments.md, "Simulator and system").
//
// Every request of the trace becomes one NBD read or write of the same byte range on the export
// of its VDI: `nbd_uri` names the export, and "{vdi}" in it is replaced by the trace's dense VDI
// id (nbd://127.0.0.1:10809/t{vdi} -> t0, t1, ...). Requests are sent one at a time, in trace
// order, each at trace time / `speed` after the start (speed 0: back to back), so the cache sees
// the trace's access order exactly. An export smaller than the trace's largest offset is an
// error before anything is sent.
//
// With `gateway` set, the cache's own per-VDI counters (ringcachectl stats: reads, hits, SSD
// writes) are read over the admin API before and after, and their differences reported; and
// the cluster's layout (ReadClusterLayout) lets the caller predict one cache per cache node.
//
// Thread-safety: one call at a time per ReplayOptions; no shared state.
#ifndef RINGCACHE_TOOLS_SIM_REPLAY_H_
#define RINGCACHE_TOOLS_SIM_REPLAY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/sim/runner.h"
#include "tools/sim/sharded_policy.h"

namespace ringcache::sim {

struct ReplayOptions {
  std::string nbd_uri;        // nbd://host:port/export ("{vdi}": the trace's VDI id)
  double speed = 0;           // trace time / speed; 0 = as fast as the server answers
  uint64_t max_requests = 0;  // 0: the whole trace
  uint32_t block_size = 4096;  // for counting block accesses as the cache does
  std::string gateway;        // admin API host:port for live counters; "" = none
  std::function<void(const std::string&)> progress;  // about once a second; may be empty
};

// What one VDI of the trace did on the live system.
struct ReplayVdi {
  uint32_t vdi = 0;
  std::string export_name;
  uint64_t requests = 0;
  uint64_t read_blocks = 0;   // block accesses, as the simulator counts them
  uint64_t write_blocks = 0;
  bool have_live = false;     // the counters below were read from the gateway
  uint64_t live_reads = 0;    // block reads the cache counted
  uint64_t live_read_hits = 0;  // RAM + SSD hits
  uint64_t live_ssd_writes = 0;
  std::string live_policy;
};

struct ReplayResult {
  std::vector<ReplayVdi> vdis;  // by trace VDI id
  uint64_t requests = 0;
  double wall_s = 0;
};

// Replays the trace `open` gives over NBD. Fails on the first NBD error (with what and where).
absl::StatusOr<ReplayResult> ReplayOverNbd(const SourceFactory& open, const ReplayOptions& options);

// What a prediction of a cluster needs from the gateway: the members of the cache ring objects
// are routed over, and the VDI id and object size of each export the trace replayed onto.
struct ClusterLayout {
  std::vector<std::pair<uint32_t, double>> ring;  // cache node id, ring weight
  std::vector<uint32_t> vdi_ids;                  // by trace VDI
  std::vector<uint64_t> object_sizes;             // by trace VDI, bytes
};
// Reads it over the admin API (ClusterStatus, ListVdis). `exports` by trace VDI ("" = none);
// an export the gateway does not know is kNotFound.
absl::StatusOr<ClusterLayout> ReadClusterLayout(const std::string& gateway,
                                                const std::vector<std::string>& exports);
// Routes a block access of the trace (key.vdi = trace VDI, key.block in `block_size` units) to
// the index in layout.ring of its object's owner, on the cache ring (ring::Ring::BuildCacheRing).
absl::StatusOr<ShardedPolicy::Route> RingRoute(const ClusterLayout& layout, uint32_t block_size);

}  // namespace ringcache::sim

#endif  // RINGCACHE_TOOLS_SIM_REPLAY_H_
