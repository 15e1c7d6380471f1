// Per-VDI I/O limits at the gateway (docs/qos.md): IOPS and bytes per second for reads, writes
// and both, each a token bucket that holds `burst_ms` of its rate. A request over a limit is
// delayed, never failed: its worker waits before it goes to the cache nodes.
//
// The limits live in the VDI catalog (`ringcachectl vdi set-qos`); a VDI's limiter reads them
// again at most once a second, so a change reaches requests in flight within a second on every
// gateway. Cluster-wide: each gateway applies `share` of every limit (QosSessions: 1 / the
// number of gateways with the VDI open), so that the limit holds with any number of them.
// A VDI may also hold a reservation (gateway/qos_reserve.h): the gateway then holds the other
// VDIs' requests back while the reserved one gets less than it.
//
// Thread-safety: TokenBucket is thread-compatible; VdiLimiter, QosRegistry and QosDevice are
// thread-safe.
#ifndef RINGCACHE_GATEWAY_QOS_H_
#define RINGCACHE_GATEWAY_QOS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "coordinator/catalog.h"
#include "gateway/block_device.h"
#include "ringcache/v1/admin.pb.h"

namespace ringcache::gateway {

inline constexpr uint32_t kDefaultBurstMs = 1000;

// Tokens flow in at `rate` per second up to `burst`. Take() reserves tokens and says how long the
// caller must wait before its request may go: the bucket may go into debt (a request larger than
// the burst waits for its whole cost), and the callers after it wait behind the debt, so the
// long-run rate never exceeds `rate` and the first `burst` tokens go at once.
class Reservations;

class TokenBucket {
 public:
  // rate <= 0: unlimited. A new limit keeps the tokens there are, up to the new burst.
  void Set(double rate, double burst, absl::Time now);
  // Reserves `n` tokens at `now`; returns the wait (zero when they were there).
  absl::Duration Take(double n, absl::Time now);
  // Whether `n` tokens are there at `now` (nothing taken).
  bool Has(double n, absl::Time now);
  // Gives `n` tokens back (up to the burst).
  void Give(double n);
  bool unlimited() const { return rate_ <= 0; }

 private:
  void Refill(absl::Time now);

  double rate_ = 0;
  double burst_ = 0;
  double tokens_ = 0;
  absl::Time last_;
};

// One window of a reserved VDI, as its limiter counted it (gateway/qos_reserve.h).
struct ReservationSample {
  uintptr_t key = 0;         // the VDI's limiter, to follow it from window to window
  double reserve_iops = 0;   // this gateway's part of the VDI's reservations (0: none)
  double reserve_bytes_per_s = 0;
  uint64_t ops = 0;          // requests admitted in the window
  uint64_t bytes = 0;        // and their bytes
  uint64_t done = 0;         // requests that ended in the window
  absl::Duration latency;    // their time at the gateway, summed
};

// One VDI's limits (and reservation) on one gateway.
class VdiLimiter : public std::enable_shared_from_this<VdiLimiter> {
 public:
  // `lookup` returns the VDI's limits from the catalog; `registry` (may be null) gets the VDI's
  // delay counters; `reservations` (may be null) are the gateway's.
  VdiLimiter(std::string vdi, Clock* clock,
             std::function<absl::StatusOr<v1::VdiQos>()> lookup, metrics::Registry* registry,
             std::shared_ptr<Reservations> reservations = nullptr);

  // Reserves one request of `bytes` (reads or writes); returns how long it must wait, and
  // counts the wait. Trims and zero writes count as writes of 0 bytes.
  absl::Duration Admit(bool write, uint64_t bytes);
  // Takes one request's tokens only when they are all there now; false (nothing taken)
  // otherwise. The asynchronous read path, which cannot wait, takes only those; the others go
  // through Admit on a worker. `*from_background`: whether it took the background's token.
  bool TryAdmitNow(bool write, uint64_t bytes, bool* from_background);
  // Gives back what TryAdmitNow took for a request that did not go.
  void Refund(bool write, uint64_t bytes, bool from_background);
  // A request of a reserved VDI starts: returns its start time, to give to Finish when it ends
  // (its time at the gateway, which tells a VDI slowed by the others from one that asks for
  // less), or InfinitePast when the VDI holds no reservation (nothing to count; no Finish).
  absl::Time Start();
  void Finish(absl::Time started);
  // This gateway's part of the reservations (0: none), for tests.
  double reserve();
  double reserve_bytes();
  // This gateway's part of each limit, in (0, 1] (QosSessions).
  void SetShare(double share);
  double share();
  v1::VdiQos limits();
  // Connections (devices) open on the VDI here: QosDevice counts itself.
  void Opened() { users_.fetch_add(1); }
  void Closed() { users_.fetch_sub(1); }
  int users() const { return users_.load(); }

 private:
  // True when nothing limits the VDI and its limits need not be read again yet: the request goes
  // without taking mu_ (the common case, on every request's path).
  bool Unlimited(int64_t now_us) const {
    return !limited_.load(std::memory_order_relaxed) &&
           now_us < next_refresh_us_.load(std::memory_order_relaxed);
  }
  friend class Reservations;
  void RefreshLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The window's reserved requests and their time, counted from zero again (Reservations' tick).
  ReservationSample TakeSample(absl::Time now);
  bool ReservedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return reserve_ > 0 || reserve_bytes_ > 0;
  }
  void CountReservedLocked(uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++window_ops_;
    window_bytes_ += bytes;
  }
  // Whether the request is within the reservation (its tokens there now); takes them if so.
  bool WithinReservationLocked(uint64_t bytes, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the request's reservation tokens, into debt: how long it must wait for them.
  absl::Duration TakeReservationLocked(uint64_t bytes, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the own limits have the request's tokens now; takes them with `take`.
  bool OwnTokensLocked(bool write, uint64_t bytes, absl::Time now, bool take)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string vdi_;
  Clock* const clock_;
  const std::function<absl::StatusOr<v1::VdiQos>()> lookup_;
  std::atomic<int> users_{0};
  const std::shared_ptr<Reservations> reservations_;
  std::atomic<bool> limited_{false};  // QosLimited(qos_), for Unlimited()
  std::atomic<bool> reserved_{false};  // ReservedLocked(), for Start()
  std::atomic<int64_t> next_refresh_us_{INT64_MIN};  // when the limits are read again
  metrics::Counter* delayed_ = nullptr;
  metrics::Counter* delay_seconds_ = nullptr;
  absl::Mutex mu_;
  v1::VdiQos qos_ ABSL_GUARDED_BY(mu_);
  double share_ ABSL_GUARDED_BY(mu_) = 1.0;
  // [0] reads, [1] writes, [2] both.
  TokenBucket ops_[3] ABSL_GUARDED_BY(mu_);
  TokenBucket bytes_[3] ABSL_GUARDED_BY(mu_);
  // The reservations (requests, bytes per second): their parts on this gateway, their buckets
  // (requests within them skip the background's), and the window's counts.
  double reserve_ ABSL_GUARDED_BY(mu_) = 0;
  double reserve_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  TokenBucket reserve_ops_bucket_ ABSL_GUARDED_BY(mu_);
  TokenBucket reserve_bytes_bucket_ ABSL_GUARDED_BY(mu_);
  uint64_t window_ops_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t window_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t window_done_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration window_latency_ ABSL_GUARDED_BY(mu_);
  metrics::Counter* short_windows_ = nullptr;
};

// The limiters of the gateway's VDIs, made on first use, and the gateway's reservations.
class QosRegistry {
 public:
  // `lookup(vdi)`: the VDI's limits from the catalog.
  QosRegistry(Clock* clock, std::function<absl::StatusOr<v1::VdiQos>(const std::string&)> lookup);
  void ExportMetrics(metrics::Registry* registry);
  std::shared_ptr<VdiLimiter> For(const std::string& vdi);
  // Every limiter made so far, by VDI name.
  std::vector<std::pair<std::string, std::shared_ptr<VdiLimiter>>> All();
  Reservations* reservations() const { return reservations_.get(); }

 private:
  Clock* const clock_;
  const std::function<absl::StatusOr<v1::VdiQos>(const std::string&)> lookup_;
  const std::shared_ptr<Reservations> reservations_;
  absl::Mutex mu_;
  metrics::Registry* registry_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::flat_hash_map<std::string, std::shared_ptr<VdiLimiter>> limiters_ ABSL_GUARDED_BY(mu_);
};

// A BlockDevice that waits for its VDI's limiter before each read, write, trim and zero write
// (flushes, cache hints and block status are not limited).
class QosDevice : public BlockDevice {
 public:
  QosDevice(std::shared_ptr<BlockDevice> inner, std::shared_ptr<VdiLimiter> limiter, Clock* clock)
      : inner_(std::move(inner)), limiter_(std::move(limiter)), clock_(clock) {
    limiter_->Opened();
  }
  ~QosDevice() override { limiter_->Closed(); }

  absl::Status Read(uint64_t offset, uint32_t len, char* buf) override;
  bool ReadAsync(uint64_t offset, uint32_t len, char* buf,
                 absl::AnyInvocable<void(absl::Status)> done) override;
  absl::Status Write(uint64_t offset, uint32_t len, const char* buf, bool fua) override;
  absl::Status Trim(uint64_t offset, uint32_t len) override;
  absl::Status WriteZeroes(uint64_t offset, uint32_t len, bool may_trim, bool fua) override;
  absl::Status Flush() override { return inner_->Flush(); }
  absl::Status Cache(uint64_t offset, uint32_t len) override { return inner_->Cache(offset, len); }
  absl::Status BlockStatus(uint64_t offset, uint32_t len, std::vector<Extent>* out) override {
    return inner_->BlockStatus(offset, len, out);
  }

 private:
  void Wait(bool write, uint64_t bytes);
  // Runs `op` between the limiter's Start and Finish.
  template <typename Op>
  absl::Status Tracked(Op op);

  const std::shared_ptr<BlockDevice> inner_;
  const std::shared_ptr<VdiLimiter> limiter_;
  Clock* const clock_;
};

}  // namespace ringcache::gateway

#endif  // RINGCACHE_GATEWAY_QOS_H_
