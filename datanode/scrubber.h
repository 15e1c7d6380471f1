// Scrubber: the data node's background scrub (docs/durability.md, "Rotten bytes"). A pass reads
// every stored block and every log record of the store and checks its checksum, throttled to a
// byte rate so that it never crowds out client I/O; passes start every `interval` (and at once
// when asked). What it finds stays listed (`open`) until the copy is repaired, replaced or
// removed: the coordinator polls the list, rewrites damaged blocks from a good replica and has
// the cache node log a damaged record again (coordinator/scrub_repair.h). The scrub itself never
// writes.
//
// Thread-safety: thread-safe; the pass runs on its own thread.
#ifndef RINGCACHE_DATANODE_SCRUBBER_H_
#define RINGCACHE_DATANODE_SCRUBBER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "datanode/store.h"
#include "ringcache/v1/datanode.pb.h"

namespace ringcache::datanode {

class Scrubber {
 public:
  struct Options {
    absl::Duration interval = absl::Hours(24 * 7);  // zero: only when asked
    double mb_s = 16;                                // read rate limit
    size_t max_open = 4096;                          // findings kept (the oldest are dropped)
  };
  // `store` and `registry` (may be null) are not owned and must outlive the scrubber.
  Scrubber(uint32_t node_id, BlockStore* store, Options options, metrics::Registry* registry);
  ~Scrubber();  // stops within one step
  Scrubber(const Scrubber&) = delete;
  Scrubber& operator=(const Scrubber&) = delete;

  // Starts a pass now unless one runs.
  void Start();
  // Progress, totals and the findings still damaged (each checked again now).
  v1::DataNodeScrubReport Report();

 private:
  void Loop();
  // One pass; returns when done or stopping.
  void Pass();

  const uint32_t node_id_;
  BlockStore* const store_;
  const Options options_;
  metrics::Counter* bytes_ = nullptr;
  metrics::Counter* damaged_blocks_ = nullptr;
  metrics::Counter* damaged_log_ = nullptr;
  metrics::Counter* passes_metric_ = nullptr;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool start_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  v1::DataNodeScrubReport report_ ABSL_GUARDED_BY(mu_);
  std::vector<ScrubFinding> open_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace ringcache::datanode

#endif  // RINGCACHE_DATANODE_SCRUBBER_H_
