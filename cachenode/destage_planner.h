// DestagePlanner: when the cache node writes dirty blocks home, decided from inputs only — the
// time, the count of foreground block operations so far, the dirty block count, the log area's
// pushback — like raft's Tick: no threads, no clock, no I/O, so its rules are unit-tested by
// feeding it numbers (destage_planner_test.cc). The Destager (destager.h) asks it every tick.
//
// The rules (docs/durability.md, "Destage"):
//  - idle: fewer than idle_ops_per_s foreground block operations per second for idle_window_ms;
//  - forced: from above the high watermark of dirty slots down to below the low watermark, and
//    while a data node's log area is over its limit (pushback);
//  - forced under load is paced: at most forced_destage_mb_s, and destage keeps the data nodes
//    busy for at most forced_destage_duty of the time (on HDDs a destage costs seeks, not bytes);
//  - the coldest VDI first: the one with the fewest accesses A_m (paper 002, eq. 1) among those
//    with dirty blocks; ties go to the lowest VDI id.
//
// Thread-safety: not thread-safe (one destager thread owns it).
#ifndef RINGCACHE_CACHENODE_DESTAGE_PLANNER_H_
#define RINGCACHE_CACHENODE_DESTAGE_PLANNER_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace ringcache::cachenode {

struct DestagePlannerOptions {
  double idle_ops_per_s = 100;
  int64_t idle_window_ms = 500;
  double dirty_high_watermark = 0.6;
  double dirty_low_watermark = 0.4;
  double forced_destage_mb_s = 64;
  double forced_destage_duty = 0.25;
  uint64_t slots = 0;  // SSD slots: the watermarks are fractions of it
};

class DestagePlanner {
 public:
  struct Decision {
    bool idle = false;     // foreground quiet for the idle window
    bool forcing = false;  // above the high watermark (until below the low one) or pushback
    bool destage() const { return idle || forcing; }
  };

  DestagePlanner(const DestagePlannerOptions& options, int64_t now_us, uint64_t foreground_ops);

  // One tick: `foreground_ops` is the running count of foreground block operations.
  Decision Tick(int64_t now_us, uint64_t foreground_ops, uint64_t dirty_blocks,
                bool log_over_limit);
  // How long to pause after one destage write under load (forced, not idle): `batch_bytes`
  // written in this batch so far over `batch_us`, the last write taking `one_us`.
  int64_t PauseMicros(uint64_t batch_bytes, int64_t batch_us, int64_t one_us) const;

  // The VDI to destage next among (vdi, accesses A_m) of the VDIs with dirty blocks.
  static std::optional<uint32_t> ColdestVdi(
      const std::vector<std::pair<uint32_t, uint64_t>>& candidates);

 private:
  const DestagePlannerOptions options_;
  uint64_t last_count_;
  int64_t last_time_;
  int64_t quiet_since_;
  bool forcing_ = false;
};

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_DESTAGE_PLANNER_H_
