// WakeLoop: a background thread that runs one step each time it is woken, and at least every
// `interval` without a wake-up. Wake-ups that arrive while a step runs fold into one more step.
// The followers of etcd state use it: a watch wakes them at once, the interval catches up what a
// stopped watch (compaction, a long outage) did not deliver.
//
// Thread-safety: Wake() may be called from any thread; the destructor stops the loop after the
// step in progress and joins it (REQUIRES: not called from the step itself).
#ifndef RINGCACHE_COMMON_WAKE_LOOP_H_
#define RINGCACHE_COMMON_WAKE_LOOP_H_

#include <functional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ringcache {

class WakeLoop {
 public:
  WakeLoop(absl::Duration interval, std::function<void()> step)
      : interval_(interval), step_(std::move(step)), thread_([this] { Run(); }) {}
  ~WakeLoop() {
    {
      absl::MutexLock l(&mu_);
      stop_ = true;
    }
    thread_.join();
  }
  WakeLoop(const WakeLoop&) = delete;
  WakeLoop& operator=(const WakeLoop&) = delete;

  void Wake() {
    absl::MutexLock l(&mu_);
    woken_ = true;
  }

 private:
  void Run() {
    for (;;) {
      {
        absl::MutexLock l(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || woken_; };
        mu_.AwaitWithTimeout(absl::Condition(&ready), interval_);
        if (stop_) return;
        woken_ = false;
      }
      step_();
    }
  }

  const absl::Duration interval_;
  const std::function<void()> step_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the rest is constructed
};

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_WAKE_LOOP_H_
