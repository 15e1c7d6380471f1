// Clock interface: every component that needs time takes a Clock*, so tests can substitute a
// simulated clock (SimulatedClock) and drive time by hand. Debian's abseil has no Clock, hence this.
//
// Thread-safety: RealClock is stateless and thread-safe. SimulatedClock is thread-safe; SleepFor
// on it advances nothing by itself — it waits until another thread advances time past the deadline.
#ifndef RINGCACHE_COMMON_CLOCK_H_
#define RINGCACHE_COMMON_CLOCK_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ringcache {

class Clock {
 public:
  virtual ~Clock() = default;
  // Returns a monotonic time in microseconds (arbitrary epoch).
  virtual int64_t NowMicros() = 0;
  // The same time as an absl::Time (for durations between two readings; not wall time).
  absl::Time Now() { return absl::FromUnixMicros(NowMicros()); }
  // Blocks the calling thread for `d` of this clock's time.
  virtual void SleepFor(absl::Duration d) = 0;

  // Returns the process-wide real clock. Never null; never freed.
  static Clock* Real();
};

// A clock that moves only when told to. Sleepers wake when time passes their deadline.
class SimulatedClock : public Clock {
 public:
  explicit SimulatedClock(int64_t start_us = 0) : now_us_(start_us) {}
  int64_t NowMicros() override {
    absl::MutexLock l(&mu_);
    return now_us_;
  }
  void SleepFor(absl::Duration d) override {
    absl::MutexLock l(&mu_);
    const int64_t deadline = now_us_ + absl::ToInt64Microseconds(d);
    auto reached = [this, deadline]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return now_us_ >= deadline;
    };
    mu_.Await(absl::Condition(&reached));
  }
  void Advance(absl::Duration d) {
    absl::MutexLock l(&mu_);
    now_us_ += absl::ToInt64Microseconds(d);
  }

 private:
  absl::Mutex mu_;
  int64_t now_us_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_CLOCK_H_
