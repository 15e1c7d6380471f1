// HDD emulation for benchmarks and demos: every request pays a seek latency plus its bytes at a
// bandwidth limit, and requests queue behind each other as on one spindle (FIFO). Log appends
// are sequential: one that follows another log append pays no seek (the head is already at the
// log's end), as with the write-back log area of paper 002. Off by default.
//
// Thread-safety: thread-safe. Charge() blocks the calling thread until its emulated completion.
#ifndef RINGCACHE_DATANODE_HDD_EMULATOR_H_
#define RINGCACHE_DATANODE_HDD_EMULATOR_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace ringcache::datanode {

struct HddConfig {
  bool enabled = false;
  double seek_ms = 5.0;            // per request
  double bandwidth_mb_s = 150.0;   // MiB/s
  absl::Status Validate() const;
};

class HddEmulator {
 public:
  // `clock` is not owned and must outlive the emulator.
  HddEmulator(const HddConfig& config, Clock* clock) : config_(config), clock_(clock) {}

  // Reserves the spindle for a request of `bytes` and returns its completion time in the clock's
  // microseconds: max(now, previous completion) + seek + bytes / bandwidth.
  // `log_append`: a sequential log append (no seek right after another one).
  int64_t Reserve(uint64_t bytes, bool log_append = false);
  // Reserves and sleeps until completion. Returns immediately when emulation is disabled.
  void Charge(uint64_t bytes, bool log_append = false);
  bool enabled() const { return config_.enabled; }

 private:
  const HddConfig config_;
  Clock* const clock_;
  absl::Mutex mu_;
  int64_t busy_until_us_ ABSL_GUARDED_BY(mu_) = 0;
  bool head_at_log_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringcache::datanode

#endif  // RINGCACHE_DATANODE_HDD_EMULATOR_H_
