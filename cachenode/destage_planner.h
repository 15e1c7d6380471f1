// DestagePlanner: when the cache node writes dirty blocks home, decided from inputs only — the
// time, the count of foreground block operations so far, the dirty block count, the log area's
// pushback — like raft's Tick: no threads, no clock, no I/O, so its rules are unit-tested by
// feeding it numbers (destage_planner_test.cc). The Destager (destager.h) asks it every tick.
//
// The rules (docs/durability.md, "Destage"):
//  - idle: fewer than idle_ops_per_s foreground block operations per second for idle_window_ms;
//  - forced: from above the high watermark of dirty slots down to below the low watermark, and
//    while a data node's log area is over its limit (pushback);
//  - aging: under load too once the oldest dirty block has been dirty for half of
//    dirty_age_target_ms, so that the age of the oldest dirty block stays near the target however
//    busy the node is (bcache's writeback delay keeps 30 s the same way);
//  - forced or aging destage under load is paced: at most forced_destage_mb_s, and destage keeps
//    the data nodes busy for at most forced_destage_duty of the time (on HDDs a destage costs
//    seeks, not bytes), both times the decision's speed: it grows with the dirty share between
//    the watermarks (1x at the low one, 4x at the high one) and with the age past the target
//    (1x at the target, 4x at 2.5x the target); at the dirty cap destage is not paced at all;
//  - writers slow down before the cap: WriteDelayMicros grows from 0 at the high watermark to
//    max_write_delay_us at the cap (quadratically), and a write that finds the node at the cap
//    waits for destage to bring it under, at most a second: never an error;
//  - the coldest VDI first: the one with the fewest accesses A_m (paper 002, eq. 1) among those
//    with dirty blocks; ties go to the lowest VDI id.
//
// Thread-safety: not thread-safe (one destager thread owns it).
#ifndef RINGCACHE_CACHENODE_DESTAGE_PLANNER_H_
#define RINGCACHE_CACHENODE_DESTAGE_PLANNER_H_

#include <atomic>
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
  uint64_t slots = 0;  // SSD slots: the watermarks are fractions of it (set_slots changes it)
  // Aging destage keeps the oldest dirty block's age near this (0: no aging destage).
  int64_t dirty_age_target_ms = 30000;
  // Dirty share of the slots that writers are held under (in (dirty_high_watermark, 1]).
  double dirty_cap = 0.9;
  // A write's delay just under the cap (the delay is 0 at the high watermark).
  int64_t max_write_delay_us = 10000;
  // Share of the slots one VDI may hold dirty (0: no per-VDI cap): a VDI at it has its writers
  // held (at most 1 s a write) while destage takes its blocks first, so one VDI's writes cannot
  // fill the node's dirty capacity for its neighbours.
  double vdi_dirty_cap = 0;
};

class DestagePlanner {
 public:
  struct Decision {
    bool idle = false;     // foreground quiet for the idle window
    bool forcing = false;  // above the high watermark (until below the low one) or pushback
    bool aging = false;    // the oldest dirty block is past half the age target
    // Pace multiplier of forced and aging destage under load (>= 1); 0: not paced (at the cap).
    double speed = 1;
    bool destage() const { return idle || forcing || aging; }
  };

  DestagePlanner(const DestagePlannerOptions& options, int64_t now_us, uint64_t foreground_ops);

  // One tick: `foreground_ops` is the running count of foreground block operations;
  // `oldest_dirty_us` how long the node's oldest dirty block has been dirty.
  Decision Tick(int64_t now_us, uint64_t foreground_ops, uint64_t dirty_blocks,
                bool log_over_limit, int64_t oldest_dirty_us = 0);
  // How long to pause after one destage write under load (forced or aging, not idle):
  // `batch_bytes` written in this batch so far over `batch_us`, the last write taking `one_us`,
  // at the decision's `speed` (0: no pause).
  int64_t PauseMicros(uint64_t batch_bytes, int64_t batch_us, int64_t one_us,
                      double speed = 1) const;
  // How long a write of a write-back VDI waits before it takes its slots, with `dirty_blocks`
  // dirty: 0 up to the high watermark, then growing to max_write_delay_us at the cap; -1 at or
  // above the cap (the writer waits for the dirty count to fall under it).
  int64_t WriteDelayMicros(uint64_t dirty_blocks) const;
  // Whether `dirty_blocks` is at or above the cap.
  bool AtCap(uint64_t dirty_blocks) const;
  // Whether one VDI's `vdi_dirty_blocks` is at or above the per-VDI cap (never without one).
  bool VdiAtCap(int64_t vdi_dirty_blocks) const;

  // The SSD slots the watermarks and caps are fractions of: the tier's size changed online
  // (CacheNode::Resize). Any thread.
  void set_slots(uint64_t slots) { slots_.store(slots, std::memory_order_relaxed); }
  uint64_t slots() const { return slots_.load(std::memory_order_relaxed); }

  // The VDI to destage next among (vdi, accesses A_m) of the VDIs with dirty blocks.
  static std::optional<uint32_t> ColdestVdi(
      const std::vector<std::pair<uint32_t, uint64_t>>& candidates);

 private:
  const DestagePlannerOptions options_;
  std::atomic<uint64_t> slots_;
  uint64_t last_count_;
  int64_t last_time_;
  int64_t quiet_since_;
  bool forcing_ = false;
};

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_DESTAGE_PLANNER_H_
