// VdiTable: the VDIs a cache node knows — geometry, cache mode and per-VDI counters — and the
// state file that keeps them across restarts (<ssd_path>.vdis), so that a restarted node can
// destage and evict its recovered blocks before any gateway registers their VDIs again.
//
// File format: "RCVDIS2\n", then per VDI a u32 length, the VdiGeometry bytes, a u8 mode, a u32
// length and the VDI's own policy spec (empty: the node's); then the XXH3 checksum of everything
// before it. Load also reads version 1 files ("RCVDIS1\n": no policy field). A damaged file is ignored (VDIs are known again
// once the gateway registers them).
//
// Thread-safety: thread-safe. Its lock is the innermost of the cache node (cachenode/README.md):
// it is taken under the block map's lock and calls nothing while held.
#ifndef RINGCACHE_CACHENODE_VDI_TABLE_H_
#define RINGCACHE_CACHENODE_VDI_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cachenode/policy/types.h"
#include "common/metrics.h"
#include "ringcache/v1/common.pb.h"

namespace ringcache::cachenode {

enum class CacheMode { kWriteBack, kWriteThrough, kWriteAround, kPassThrough };
const char* CacheModeName(CacheMode m);
absl::StatusOr<CacheMode> ParseCacheMode(const std::string& s);

// Per-VDI counters, for ringcachectl stats and /metrics.
struct VdiCounters {
  std::atomic<uint64_t> reads{0}, writes{0}, hits_ram{0}, hits_ssd{0}, misses{0}, bypassed{0};
  std::atomic<uint64_t> admissions_rejected{0}, evictions{0}, destaged_bytes{0};
  // Blocks written to SSD slots for the policy: cached writes, fills of admitted misses and RAM
  // demotions (what ringcache-sim counts as ssd_writes; slot repairs are not counted).
  std::atomic<uint64_t> ssd_writes{0};
  std::atomic<int64_t> dirty_blocks{0};
};

// One VDI as the cache node sees it (a copy; the counters are shared).
struct VdiInfo {
  v1::VdiGeometry geometry;
  CacheMode mode = CacheMode::kWriteBack;
  std::string policy;  // the VDI's own policy spec; "" = the node's
  std::shared_ptr<VdiCounters> counters;

  uint32_t id() const { return geometry.vdi_id(); }
  uint64_t blocks_per_object() const { return geometry.object_size() / geometry.block_size(); }
  // The key of block `block_in_object` of `object`.
  policy::BlockKey KeyOf(uint64_t object, uint32_t block_in_object) const {
    return {id(), object * blocks_per_object() + block_in_object};
  }
  uint64_t ObjectOf(const policy::BlockKey& key) const { return key.block / blocks_per_object(); }
};

// What the load-aware policy needs of a VDI, without copying its geometry.
struct VdiLayout {
  uint64_t blocks_per_object = 0;
  uint32_t replication = 0;
};

class VdiTable {
 public:
  // `path`: the state file; `registry` (not owned) gets the per-VDI counters.
  VdiTable(uint32_t node_id, uint32_t block_size, std::string path, metrics::Registry* registry);

  // Registers a VDI or updates its geometry (its mode is kept). Returns true for a VDI seen for
  // the first time. Not persisted until Save().
  absl::StatusOr<bool> Register(const v1::VdiGeometry& vdi);
  // The VDI, or the typed kUnknownVdi error (the gateway re-registers it and retries).
  absl::StatusOr<VdiInfo> Get(uint32_t vdi) const;
  std::optional<VdiLayout> Layout(uint32_t vdi) const;
  // The VDI's counters, or null for an unknown VDI.
  std::shared_ptr<VdiCounters> Counters(uint32_t vdi) const;
  // Sets the mode of a known VDI (kInvalidArgument otherwise). Not persisted until Save().
  absl::Status SetMode(uint32_t vdi, CacheMode mode);
  // Records the policy spec of a known VDI (kInvalidArgument otherwise). Not persisted until
  // Save(). The caller has applied it to the policy.
  absl::Status SetPolicy(uint32_t vdi, const std::string& spec);
  void Erase(uint32_t vdi);
  std::vector<VdiInfo> All() const;

  // Writes the table atomically; concurrent saves never put an older table over a newer one.
  absl::Status Save();
  // Reads the table written by Save (nothing on a first start or a damaged file). Returns the
  // ids of the VDIs loaded.
  std::vector<uint32_t> Load();

 private:
  const uint32_t node_id_;
  const uint32_t block_size_;
  const std::string path_;
  metrics::Registry* const registry_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, VdiInfo> vdis_ ABSL_GUARDED_BY(mu_);
  uint64_t gen_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Mutex file_mu_;  // taken after mu_ is released
  uint64_t saved_gen_ ABSL_GUARDED_BY(file_mu_) = 0;
};

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_VDI_TABLE_H_
