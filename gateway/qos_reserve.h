// I/O reservations per VDI at the gateway (docs/qos.md "Reservations"): a VDI given
// `vdi set-qos --reserve-iops R` gets R requests per second however busy the other VDIs are.
//
// The gateway does not know how many requests per second the cache tier can take (it changes
// with hits, writes, destage, other gateways), so a reservation is kept by feedback, not by a
// capacity budget: every window (250 ms) the gateway looks at each reserved VDI. A VDI is
// *short* when it kept requests in flight for most of the window (it wanted more) and still got
// less than its reservation; then the requests of everyone else (VDIs without a reservation,
// and reserved VDIs beyond theirs: the *background*) go through one shared token bucket whose
// rate falls by a factor each window while some VDI is short, and rises again, slowly, once
// none is. When the background runs well under its rate the bucket is removed. What a reserved
// VDI takes within its reservation never waits for the background bucket.
//
// The decrease is multiplicative and the increase gentler (additive plus a small factor), the
// rule TCP's congestion control and PARDA (FAST '09) use to share a resource nobody measures
// directly. The background never stops: its rate has a floor (kMinBackgroundIops), so a
// request is delayed, never failed.
//
// Thread-safety: ReservationControl is thread-compatible; Reservations is thread-safe.
#ifndef RINGCACHE_GATEWAY_QOS_RESERVE_H_
#define RINGCACHE_GATEWAY_QOS_RESERVE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "gateway/qos.h"

namespace ringcache::gateway {

inline constexpr double kMinBackgroundIops = 50;
inline constexpr absl::Duration kReserveWindow = absl::Milliseconds(250);

// The rule alone: from one window's samples, the background's rate for the next.
class ReservationControl {
 public:
  using Sample = ReservationSample;
  // A VDI is short when busy at least this part of the window and below this part of its
  // reservation; the background speeds up again once every busy reserved VDI has at least
  // kMetShare of its reservation.
  static constexpr double kBusyShare = 0.8;
  static constexpr double kShortShare = 0.95;
  static constexpr double kMetShare = 1.0;
  static constexpr double kDecrease = 0.7;   // the rate's factor per window while one is short
  static constexpr double kIncrease = 1.1;   // and per window after, plus kIncreaseIops
  static constexpr double kIncreaseIops = 20;

  // Returns the background's rate for the next window (0: no limit). `background_ops`: the
  // requests of the background admitted in the window.
  double Step(const std::vector<Sample>& reserved, uint64_t background_ops, absl::Duration window);
  double rate() const { return rate_; }
  // How many of the last Step's samples were short, and which.
  int shorts() const { return shorts_; }
  const std::vector<bool>& short_samples() const { return short_; }

 private:
  double rate_ = 0;
  int shorts_ = 0;
  std::vector<bool> short_;
};

// The gateway's reservations: the limiters of the VDIs that hold one, the background bucket,
// and the window's tick (run by whichever request comes first after the window ends).
class Reservations {
 public:
  explicit Reservations(Clock* clock) : clock_(clock) {}
  void ExportMetrics(metrics::Registry* registry);

  // A limiter whose VDI holds a reservation now (reserved) or no longer (!reserved). Called
  // with the limiter's lock held (never the other way round).
  void Track(const std::weak_ptr<VdiLimiter>& limiter, bool reserved);
  // True while some VDI holds a reservation: requests are counted and the tick runs.
  bool armed() const { return armed_.load(std::memory_order_relaxed); }
  // True while the background bucket limits.
  bool limiting() const { return limiting_.load(std::memory_order_relaxed); }

  // One background request: how long it must wait (zero while nothing limits).
  absl::Duration TakeBackground();
  // The asynchronous read path: takes a background request only when its token is there now.
  bool TryTakeBackground();
  void GiveBackground();
  // Runs the window's step when a window has ended (a cheap check otherwise). Must be called
  // without a limiter's lock held.
  void MaybeTick();
  // The background's rate now (0: none), for tests and metrics.
  double background_rate();

 private:
  void Tick(absl::Time now);

  Clock* const clock_;
  std::atomic<bool> armed_{false};
  std::atomic<bool> limiting_{false};
  std::atomic<uint64_t> background_ops_{0};
  std::atomic<int64_t> next_tick_us_{0};
  absl::Mutex tick_mu_;  // one tick at a time; taken before mu_
  ReservationControl control_ ABSL_GUARDED_BY(tick_mu_);
  absl::Time last_tick_ ABSL_GUARDED_BY(tick_mu_);
  absl::Mutex mu_;
  std::vector<std::weak_ptr<VdiLimiter>> reserved_ ABSL_GUARDED_BY(mu_);
  TokenBucket background_ ABSL_GUARDED_BY(mu_);
  metrics::Gauge* rate_gauge_ = nullptr;
};

}  // namespace ringcache::gateway

#endif  // RINGCACHE_GATEWAY_QOS_RESERVE_H_
