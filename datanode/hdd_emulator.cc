#include "datanode/hdd_emulator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringcache::datanode {

absl::Status HddConfig::Validate() const {
  if (seek_ms < 0 || seek_ms > 10000) {
    return absl::InvalidArgumentError(
        absl::StrCat("hdd_emulation.seek_ms ", seek_ms, " must be in [0, 10000]"));
  }
  if (bandwidth_mb_s <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hdd_emulation.bandwidth_mb_s ", bandwidth_mb_s, " must be positive"));
  }
  return absl::OkStatus();
}

int64_t HddEmulator::Reserve(uint64_t bytes, bool log_append) {
  const double transfer_us =
      static_cast<double>(bytes) / (config_.bandwidth_mb_s * 1024.0 * 1024.0) * 1e6;
  const int64_t now = clock_->NowMicros();
  absl::MutexLock l(&mu_);
  const bool seek = !(log_append && head_at_log_);
  head_at_log_ = log_append;
  const int64_t cost =
      static_cast<int64_t>((seek ? config_.seek_ms * 1000.0 : 0.0) + transfer_us);
  busy_until_us_ = std::max(busy_until_us_, now) + cost;
  return busy_until_us_;
}

void HddEmulator::Charge(uint64_t bytes, bool log_append) {
  if (!config_.enabled) return;
  const int64_t done = Reserve(bytes, log_append);
  const int64_t wait = done - clock_->NowMicros();
  if (wait > 0) clock_->SleepFor(absl::Microseconds(wait));
}

}  // namespace ringcache::datanode
