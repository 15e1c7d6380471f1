#include "gateway/drain_watch.h"

#include <algorithm>
#include <utility>

namespace ringcache::gateway {

DrainWatch::DrainWatch(Probe probe, Stats stats, Report report)
    : probe_(std::move(probe)), stats_(std::move(stats)), report_(std::move(report)) {
  thread_ = std::thread([this] { Run(); });
}

DrainWatch::~DrainWatch() { Stop(); }

void DrainWatch::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void DrainWatch::Run() {
  uint64_t start = 0;
  bool first = true;
  absl::MutexLock l(&mu_);
  while (!stop_) {
    mu_.Unlock();
    // The probe first: the stats call waits for a node that restarts (up to its deadline), and
    // a removal of a killed node would answer the operator that much later, once it was done.
    std::vector<v1::VdiCacheStats> stats;
    const bool answers = probe_ != nullptr && probe_(kProbeTimeoutMs).ok() &&
                         stats_ != nullptr && stats_(&stats).ok();
    if (answers) {
      uint64_t dirty = 0;
      for (const auto& v : stats) dirty += v.dirty_bytes();
      if (first) start = dirty;
      first = false;
      start = std::max(start, dirty);
      report_("destaging its dirty data", start, dirty);
    } else {
      report_("not answering: replaying its write-back log from the data nodes", start, 0);
    }
    mu_.Lock();
    auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    mu_.AwaitWithTimeout(absl::Condition(&stopped), absl::Seconds(1));
  }
}

}  // namespace ringcache::gateway
