#include "coordinator/copy_pacer.h"

#include <algorithm>

namespace ringcache::coordinator {

void CopyPacer::Sample(absl::Time now) {
  // Without a busy rate the count changes nothing: no need to ask the data nodes for it.
  if (now < next_sample_ || options_.busy_mb_s <= 0) return;
  next_sample_ = now + options_.sample;
  const std::optional<uint64_t> ops = client_ops_ ? client_ops_() : std::nullopt;
  // Unknown (a node did not answer) counts as busy: the lower rate is the safe one.
  busy_ = !ops.has_value() || !last_ops_.has_value() || *ops != *last_ops_;
  last_ops_ = ops;
}

double CopyPacer::limit_bytes_per_s() const {
  const double mb_s = busy_ && options_.busy_mb_s > 0 ? options_.busy_mb_s : options_.idle_mb_s;
  return mb_s * 1e6;
}

absl::Duration CopyPacer::After(uint64_t bytes, absl::Time now) {
  Sample(now);
  const double rate = limit_bytes_per_s();
  if (rate <= 0) return absl::ZeroDuration();
  // A copy that waited for its source (or started after a pause) earns no burst beyond the slack.
  next_free_ =
      std::max(next_free_, now - options_.slack) + absl::Seconds(static_cast<double>(bytes) / rate);
  return std::max(absl::ZeroDuration(), next_free_ - now);
}

}  // namespace ringcache::coordinator
