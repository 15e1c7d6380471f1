// SeqCutoffBypass: bypass of long sequential streams, like bcache's sequential_cutoff (the kernel's
// Documentation/admin-guide/bcache.rst: "A sequential IO will bypass the cache once it passes this
// threshold; the most recent 128 IOs are tracked so sequential IO can be detected even when it
// isn't all done at once").
//
// Up to `streams` recent streams are tracked, each by the next block it expects (per VDI) and its
// run length in blocks. An access to block b of a VDI continues the stream expecting b (run + 1,
// now expecting b + 1); otherwise it starts a new run of 1, replacing the least recently started or
// extended stream. Once a run is longer than `cutoff_blocks`, its accesses bypass the cache.
//
// Thread-safety: not thread-safe; driven by one CacheDriver.
#ifndef RINGCACHE_CACHENODE_POLICY_SEQ_CUTOFF_H_
#define RINGCACHE_CACHENODE_POLICY_SEQ_CUTOFF_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "cachenode/policy/bypass.h"

namespace ringcache::policy {

struct SeqCutoffConfig {
  uint64_t cutoff_blocks = 1024;  // 4 MiB of 4 KiB blocks, bcache's default sequential_cutoff
  uint32_t streams = 128;         // recent streams tracked (bcache: 128 recent IOs)
  absl::Status Validate() const;
};

class SeqCutoffBypass final : public Bypass {
 public:
  // REQUIRES: config.Validate().ok().
  explicit SeqCutoffBypass(const SeqCutoffConfig& config);

  std::string_view name() const override { return "seqcut"; }
  bool Check(const Access& access, bool hit) override;
  size_t MetadataBytes() const override;

 private:
  struct Stream {
    BlockKey next;     // block the stream expects next
    uint64_t run = 0;  // blocks in the run so far; 0 = unused
    uint64_t stamp = 0;
  };

  SeqCutoffConfig config_;
  std::vector<Stream> streams_;
  absl::flat_hash_map<BlockKey, uint32_t> by_next_;  // expected block -> stream
  uint64_t clock_ = 0;  // access counter used as the streams' recency stamp
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_SEQ_CUTOFF_H_
