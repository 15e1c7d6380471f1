#include "cachenode/destage_planner.h"

#include <algorithm>

namespace ringcache::cachenode {

DestagePlanner::DestagePlanner(const DestagePlannerOptions& options, int64_t now_us,
                               uint64_t foreground_ops)
    : options_(options),
      slots_(options.slots),
      last_count_(foreground_ops),
      last_time_(now_us),
      quiet_since_(now_us) {}

DestagePlanner::Decision DestagePlanner::Tick(int64_t now_us, uint64_t foreground_ops,
                                              uint64_t dirty_blocks, bool log_over_limit,
                                              int64_t oldest_dirty_us) {
  const double rate = static_cast<double>(foreground_ops - last_count_) * 1e6 /
                      static_cast<double>(std::max<int64_t>(1, now_us - last_time_));
  last_count_ = foreground_ops;
  last_time_ = now_us;
  if (rate >= options_.idle_ops_per_s) quiet_since_ = now_us;
  Decision d;
  d.idle = now_us - quiet_since_ >= options_.idle_window_ms * 1000;
  const double total = static_cast<double>(slots());
  if (dirty_blocks > options_.dirty_high_watermark * total) forcing_ = true;
  if (dirty_blocks < options_.dirty_low_watermark * total) forcing_ = false;
  // Pushback: a data node's log area is over its limit; destage so records can be reclaimed.
  if (log_over_limit && dirty_blocks > 0) forcing_ = true;
  d.forcing = forcing_;
  // Aging (bcache's writeback delay, docs/cache-node.md "Destage"): start at half the target so
  // that a paced destage keeps the oldest block near the target, not past it.
  const double target_us = static_cast<double>(options_.dirty_age_target_ms) * 1000.0;
  const double age = static_cast<double>(oldest_dirty_us);
  d.aging = target_us > 0 && dirty_blocks > 0 && age >= target_us / 2;
  // The pace: faster the dirtier the node (1x at the low watermark, 4x at the high one) and the
  // older its oldest block (1x at the target, 4x at 2.5x the target); unpaced at the cap.
  const double f = total > 0 ? static_cast<double>(dirty_blocks) / total : 0;
  const double span = options_.dirty_high_watermark - options_.dirty_low_watermark;
  const double by_dirt = 1 + 3 * std::clamp((f - options_.dirty_low_watermark) / span, 0.0, 1.0);
  const double by_age = target_us > 0 ? std::clamp(2 * age / target_us - 1, 1.0, 4.0) : 1.0;
  d.speed = AtCap(dirty_blocks) ? 0 : std::max(by_dirt, by_age);
  return d;
}

bool DestagePlanner::AtCap(uint64_t dirty_blocks) const {
  return slots() > 0 &&
         static_cast<double>(dirty_blocks) >= options_.dirty_cap * static_cast<double>(slots());
}

bool DestagePlanner::VdiAtCap(int64_t vdi_dirty_blocks) const {
  return options_.vdi_dirty_cap > 0 && slots() > 0 &&
         static_cast<double>(vdi_dirty_blocks) >=
             options_.vdi_dirty_cap * static_cast<double>(slots());
}

int64_t DestagePlanner::WriteDelayMicros(uint64_t dirty_blocks) const {
  if (slots() == 0) return 0;
  if (AtCap(dirty_blocks)) return -1;
  const double f = static_cast<double>(dirty_blocks) / static_cast<double>(slots());
  const double x = (f - options_.dirty_high_watermark) /
                   (options_.dirty_cap - options_.dirty_high_watermark);
  if (x <= 0) return 0;
  return static_cast<int64_t>(static_cast<double>(options_.max_write_delay_us) * x * x);
}

int64_t DestagePlanner::PauseMicros(uint64_t batch_bytes, int64_t batch_us, int64_t one_us,
                                    double speed) const {
  if (speed <= 0) return 0;
  const double allowed_us = static_cast<double>(batch_bytes) /
                            (options_.forced_destage_mb_s * speed * 1048576.0) * 1e6;
  double pause = std::max(0.0, allowed_us - static_cast<double>(batch_us));
  const double duty = std::min(1.0, options_.forced_destage_duty * speed);
  pause = std::max(pause, static_cast<double>(one_us) * (1.0 / duty - 1.0));
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
