#include "cachenode/destage_planner.h"

#include <algorithm>

namespace ringcache::cachenode {

DestagePlanner::DestagePlanner(const DestagePlannerOptions& options, int64_t now_us,
                               uint64_t foreground_ops)
    : options_(options), last_count_(foreground_ops), last_time_(now_us), quiet_since_(now_us) {}

DestagePlanner::Decision DestagePlanner::Tick(int64_t now_us, uint64_t foreground_ops,
                                              uint64_t dirty_blocks, bool log_over_limit) {
  const double rate = static_cast<double>(foreground_ops - last_count_) * 1e6 /
                      static_cast<double>(std::max<int64_t>(1, now_us - last_time_));
  last_count_ = foreground_ops;
  last_time_ = now_us;
  if (rate >= options_.idle_ops_per_s) quiet_since_ = now_us;
  Decision d;
  d.idle = now_us - quiet_since_ >= options_.idle_window_ms * 1000;
  const double slots = static_cast<double>(options_.slots);
  if (dirty_blocks > options_.dirty_high_watermark * slots) forcing_ = true;
  if (dirty_blocks < options_.dirty_low_watermark * slots) forcing_ = false;
  // Pushback: a data node's log area is over its limit; destage so records can be reclaimed.
  if (log_over_limit && dirty_blocks > 0) forcing_ = true;
  d.forcing = forcing_;
  return d;
}

int64_t DestagePlanner::PauseMicros(uint64_t batch_bytes, int64_t batch_us,
                                    int64_t one_us) const {
  const double allowed_us =
      static_cast<double>(batch_bytes) / (options_.forced_destage_mb_s * 1048576.0) * 1e6;
  double pause = std::max(0.0, allowed_us - static_cast<double>(batch_us));
  pause = std::max(pause, static_cast<double>(one_us) * (1.0 / options_.forced_destage_duty - 1.0));
  return static_cast<int64_t>(pause);
}

std::optional<uint32_t> DestagePlanner::ColdestVdi(
    const std::vector<std::pair<uint32_t, uint64_t>>& candidates) {
  std::optional<uint32_t> best;
  uint64_t best_accesses = 0;
  for (const auto& [vdi, accesses] : candidates) {
    if (!best || accesses < best_accesses || (accesses == best_accesses && vdi < *best)) {
      best = vdi;
      best_accesses = accesses;
    }
  }
  return best;
}

}  // namespace ringcache::cachenode
