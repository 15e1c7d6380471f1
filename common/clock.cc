// Real clock backed by absl's monotonic-enough wall clock and thread sleep.
#include "common/clock.h"

#include <chrono>
#include <thread>

namespace ringcache {
namespace {

class RealClock : public Clock {
 public:
  int64_t NowMicros() override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void SleepFor(absl::Duration d) override { absl::SleepFor(d); }
};

}  // namespace

Clock* Clock::Real() {
  static Clock* const clock = new RealClock();
  return clock;
}

}  // namespace ringcache
