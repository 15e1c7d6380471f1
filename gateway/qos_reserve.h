// I/O reservations per VDI at the gateway (docs/qos.md "Reservations"): a VDI given
// `vdi set-qos --reserve-iops R` gets R requests per second (`--reserve-bps`: bytes per second)
// however busy the other VDIs are.
//
// The gateway knows neither how many requests per second the cache tier can take (it changes
// with hits, writes, destage, other gateways) nor how many a VM would send if served faster (a
// guest waits for its answers before it asks again). So a reservation is kept by feedback:
// every window (250 ms) the gateway looks at each reserved VDI. A VDI is *short* when it got
// less than its reservation while its requests took longer at the gateway than they do without
// contention (kSlow times its best window of the last 30 s): the others slow it down. Then
// the requests of everyone else (VDIs without a reservation, and reserved VDIs beyond theirs:
// the *background*) go through one shared token bucket whose rate falls by a factor each window
// while some VDI is short, and rises again, more slowly, once none is slow (below kFast times
// its best); well above what the background uses, the bucket is removed. What a reserved VDI
// takes within its reservation never waits for the background's bucket.
//
// A VDI that ran under contention from the start has never shown its uncontended time: while
// one is below its reservation with no hold, the gateway *probes* now and then (after
// kProbeAfter windows, then every kProbeEvery) by holding the background to kProbeShare of
// what it made for kProbeWindows windows, and learns its best time there (each probe, and each
// hold after it, can only lower that best: a half-load best is improved by the holds it starts).
//
// Several gateways (cluster mode): VMs on different gateways slow each other down through the
// cache nodes they share. A gateway with a short VDI in the last second says so in etcd
// (QosSessions, P/qos-holds/<gateway id> under its lease); every gateway that sees another's
// key holds its own background too: cut once per second it sees one (a second holds four
// windows: cutting each would be 0.24x a second), never raised meanwhile.
//
// The decrease is multiplicative and the increase gentler (by a factor, plus a constant), the
// rule TCP's congestion control uses, and with a latency target, as PARDA (FAST '09) controls
// hosts sharing an array. The background never stops: its rate has a floor
// (kMinBackgroundIops), so a request is delayed, never failed.
//
// Thread-safety: ReservationControl is thread-compatible; Reservations is thread-safe.
#ifndef RINGCACHE_GATEWAY_QOS_RESERVE_H_
#define RINGCACHE_GATEWAY_QOS_RESERVE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "gateway/qos.h"

namespace ringcache::gateway {

inline constexpr double kMinBackgroundIops = 50;
inline constexpr absl::Duration kReserveWindow = absl::Milliseconds(250);

// What other gateways say: one of theirs is short (`short_now`: the rate is not raised
// meanwhile), and a new report of it came since the last Step (`cut`: cut once).
struct ReservationRemote {
  bool short_now = false;
  bool cut = false;
};

// The rule alone: from one window's samples, the background's rate for the next.
class ReservationControl {
 public:
  using Sample = ReservationSample;
  static constexpr double kShortShare = 0.95;  // below this part of its reservation: below
  static constexpr double kSlow = 1.5;         // short: below, and slower than kSlow x best
  static constexpr double kFast = 1.2;         // the rate rises only while none is slower
  static constexpr double kDecrease = 0.7;     // the rate's factor per window while one is short
  static constexpr double kIncrease = 1.1;     // and per window after, plus kIncreaseIops
  static constexpr double kIncreaseIops = 20;
  static constexpr uint64_t kMinDone = 8;      // fewer ended requests in a window tell nothing
  static constexpr int kBestWindows = 120;     // a best time is kept for 30 s
  static constexpr int kProbeAfter = 4;        // windows below with no hold before a first probe
  static constexpr int kProbeEvery = 120;      // and between probes (30 s)
  static constexpr int kProbeWindows = 2;
  static constexpr double kProbeShare = 0.5;   // the background's rate in a probe

  using Remote = ReservationRemote;
  // Returns the background's rate for the next window (0: no limit). `background_ops`: the
  // requests of the background admitted in the window.
  double Step(const std::vector<Sample>& reserved, uint64_t background_ops, absl::Duration window,
              Remote remote = {});
  double rate() const { return rate_; }
  bool probing() const { return probing_ > 0; }
  // How many of the last Step's samples were short, and which.
  int shorts() const { return shorts_; }
  const std::vector<bool>& short_samples() const { return short_; }

 private:
  struct Best {
    double seconds = 0;  // the VDI's best mean time per request (0: none yet)
    int age = 0;         // windows since it was set
    bool seen = false;   // in this Step's samples
  };
  double rate_ = 0;
  int shorts_ = 0;
  std::vector<bool> short_;
  absl::flat_hash_map<uintptr_t, Best> best_;
  int probing_ = 0;                 // windows of the probe left
  int unheld_ = 0;                  // windows some VDI was below with no hold
  bool probed_ = false;             // a probe ran since the hold last ended
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

  // Whether a VDI here was short since the last call (QosSessions' round, once a second).
  bool TakeShortSinceLastRound() { return short_since_round_.exchange(false); }
  // Another gateway has a short VDI (QosSessions' round): hold this gateway's background too.
  void SetRemoteShort(bool remote_short);

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
  // armed_ from the reserved VDIs and the others' report; the bucket goes when both are none.
  void ArmLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Clock* const clock_;
  std::atomic<bool> armed_{false};
  std::atomic<bool> limiting_{false};
  std::atomic<int64_t> background_ops_{0};
  std::atomic<int64_t> next_tick_us_{0};
  std::atomic<bool> short_since_round_{false};
  std::atomic<bool> remote_short_{false};
  std::atomic<bool> remote_cut_{false};  // a report came since the last tick
  absl::Mutex tick_mu_;  // one tick at a time; taken before mu_
  ReservationControl control_ ABSL_GUARDED_BY(tick_mu_);
  absl::Time last_tick_ ABSL_GUARDED_BY(tick_mu_) = absl::InfinitePast();
  absl::Mutex mu_;
  std::vector<std::weak_ptr<VdiLimiter>> reserved_ ABSL_GUARDED_BY(mu_);
  TokenBucket background_ ABSL_GUARDED_BY(mu_);
  metrics::Gauge* rate_gauge_ = nullptr;
};

}  // namespace ringcache::gateway

#endif  // RINGCACHE_GATEWAY_QOS_RESERVE_H_
