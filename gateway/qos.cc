#include "gateway/qos.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "gateway/qos_reserve.h"

namespace ringcache::gateway {

// ---- TokenBucket ----

void TokenBucket::Set(double rate, double burst, absl::Time now) {
  Refill(now);
  const bool was_unlimited = unlimited();
  rate_ = rate;
  burst_ = std::max(burst, 1.0);
  // A bucket that starts limiting starts full: the limit holds from now on, not backwards.
  tokens_ = was_unlimited ? burst_ : std::min(tokens_, burst_);
  last_ = now;
}

void TokenBucket::Refill(absl::Time now) {
  if (unlimited()) return;
  if (now > last_) {
    tokens_ = std::min(burst_, tokens_ + rate_ * absl::ToDoubleSeconds(now - last_));
    last_ = now;
  }
}

absl::Duration TokenBucket::Take(double n, absl::Time now) {
  if (unlimited()) return absl::ZeroDuration();
  Refill(now);
  tokens_ -= n;
  if (tokens_ >= 0) return absl::ZeroDuration();
  return absl::Seconds(-tokens_ / rate_);
}

bool TokenBucket::Has(double n, absl::Time now) {
  if (unlimited()) return true;
  Refill(now);
  return tokens_ >= n;
}

void TokenBucket::Give(double n) {
  if (!unlimited()) tokens_ = std::min(burst_, tokens_ + n);
}

// ---- VdiLimiter ----

VdiLimiter::VdiLimiter(std::string vdi, Clock* clock,
                       std::function<absl::StatusOr<v1::VdiQos>()> lookup,
                       metrics::Registry* registry, std::shared_ptr<Reservations> reservations)
    : vdi_(std::move(vdi)),
      clock_(clock),
      lookup_(std::move(lookup)),
      reservations_(std::move(reservations)) {
  if (registry != nullptr) {
    delayed_ = registry->GetCounter(
        "ringcache_gateway_qos_delayed_requests_total",
        "Requests of a VDI held back by its I/O limits (ringcachectl vdi set-qos).",
        {{"vdi", vdi_}});
    delay_seconds_ = registry->GetCounter(
        "ringcache_gateway_qos_delay_seconds_total",
        "Time the requests of a VDI waited for its I/O limits, summed.", {{"vdi", vdi_}});
    short_windows_ = registry->GetCounter(
        "ringcache_gateway_qos_reservation_short_windows_total",
        "Windows (250 ms) in which a VDI wanted more I/O than it got and got less than its "
        "reservation (the gateway then holds the other VDIs back).",
        {{"vdi", vdi_}});
  }
}

void VdiLimiter::RefreshLocked(absl::Time now) {
  const int64_t now_us = absl::ToUnixMicros(now);
  if (now_us < next_refresh_us_.load(std::memory_order_relaxed)) return;
  next_refresh_us_.store(now_us + 1000000, std::memory_order_relaxed);
  absl::StatusOr<v1::VdiQos> q = lookup_();
  if (!q.ok()) return;  // deleted, or the catalog cannot say: keep what there is
  if (q->SerializeAsString() == qos_.SerializeAsString()) return;
  qos_ = *std::move(q);
  limited_.store(coordinator::QosLimited(qos_), std::memory_order_relaxed);
  ApplyLocked(now);
}

void VdiLimiter::ApplyLocked(absl::Time now) {
  const double burst_s = (qos_.burst_ms() ? qos_.burst_ms() : kDefaultBurstMs) / 1000.0;
  auto set = [&](TokenBucket* b, uint64_t limit) {
    const double rate = static_cast<double>(limit) * share_;
    b->Set(rate, rate * burst_s, now);
  };
  set(&ops_[0], qos_.read_iops());
  set(&ops_[1], qos_.write_iops());
  set(&ops_[2], qos_.iops());
  set(&bytes_[0], qos_.read_bytes_per_s());
  set(&bytes_[1], qos_.write_bytes_per_s());
  set(&bytes_[2], qos_.bytes_per_s());
  const bool was = ReservedLocked();
  reserve_ = static_cast<double>(qos_.reserve_iops()) * share_;
  reserve_bytes_ = static_cast<double>(qos_.reserve_bytes_per_s()) * share_;
  // A tenth of a second of the reservation may go at once: enough for a burst of a queue's
  // requests, too little to skip the background's bucket for long after an idle spell.
  reserve_ops_bucket_.Set(reserve_, std::max(1.0, reserve_ / 10), now);
  reserve_bytes_bucket_.Set(reserve_bytes_, std::max(1.0, reserve_bytes_ / 10), now);
  const bool reserved = ReservedLocked();
  reserved_.store(reserved, std::memory_order_relaxed);
  if (was != reserved && reservations_ != nullptr) {
    reservations_->Track(weak_from_this(), reserved);
  }
}

bool VdiLimiter::WithinReservationLocked(uint64_t bytes, absl::Time now) {
  if (!ReservedLocked() || !reserve_ops_bucket_.Has(1, now) ||
      !reserve_bytes_bucket_.Has(static_cast<double>(bytes), now)) {
    return false;
  }
  TakeReservationLocked(bytes, now);
  return true;
}

absl::Duration VdiLimiter::TakeReservationLocked(uint64_t bytes, absl::Time now) {
  return std::max(reserve_ops_bucket_.Take(1, now),
                  reserve_bytes_bucket_.Take(static_cast<double>(bytes), now));
}

double VdiLimiter::reserve() {
  absl::MutexLock l(&mu_);
  RefreshLocked(clock_->Now());
  return reserve_;
}

double VdiLimiter::reserve_bytes() {
  absl::MutexLock l(&mu_);
  RefreshLocked(clock_->Now());
  return reserve_bytes_;
}

absl::Time VdiLimiter::Start() {
  if (!reserved_.load(std::memory_order_relaxed)) return absl::InfinitePast();
  return clock_->Now();
}

void VdiLimiter::Finish(absl::Time started) {
  const absl::Time now = clock_->Now();
  absl::MutexLock l(&mu_);
  ++window_done_;
  window_latency_ += now - started;
}

ReservationSample VdiLimiter::TakeSample(absl::Time now) {
  absl::MutexLock l(&mu_);
  RefreshLocked(now);
  ReservationSample s;
  s.key = reinterpret_cast<uintptr_t>(this);
  s.reserve_iops = reserve_;
  s.reserve_bytes_per_s = reserve_bytes_;
  s.ops = window_ops_;
  s.bytes = window_bytes_;
  s.done = window_done_;
  s.latency = window_latency_;
  window_ops_ = 0;
  window_bytes_ = 0;
  window_done_ = 0;
  window_latency_ = absl::ZeroDuration();
  return s;
}

void VdiLimiter::SetShare(double share) {
  absl::MutexLock l(&mu_);
  share = std::clamp(share, 0.01, 1.0);
  if (share == share_) return;
  share_ = share;
  ApplyLocked(clock_->Now());
}

double VdiLimiter::share() {
  absl::MutexLock l(&mu_);
  return share_;
}

v1::VdiQos VdiLimiter::limits() {
  absl::MutexLock l(&mu_);
  RefreshLocked(clock_->Now());
  return qos_;
}

bool VdiLimiter::OwnTokensLocked(bool write, uint64_t bytes, absl::Time now, bool take) {
  const int kind = write ? 1 : 0;
  const double b = static_cast<double>(bytes);
  if (!take) {
    return ops_[kind].Has(1, now) && ops_[2].Has(1, now) && bytes_[kind].Has(b, now) &&
           bytes_[2].Has(b, now);
  }
  ops_[kind].Take(1, now);
  ops_[2].Take(1, now);
  bytes_[kind].Take(b, now);
  bytes_[2].Take(b, now);
  return true;
}

absl::Duration VdiLimiter::Admit(bool write, uint64_t bytes) {
  Reservations* const res = reservations_.get();
  const bool armed = res != nullptr && res->armed();
  if (armed) res->MaybeTick();
  absl::Duration wait;
  bool background = true;  // the request goes through the background's bucket
  if (!Unlimited(clock_->NowMicros())) {
    absl::MutexLock l(&mu_);
    const absl::Time now = clock_->Now();
    RefreshLocked(now);
    const int kind = write ? 1 : 0;
    wait = std::max({ops_[kind].Take(1, now), ops_[2].Take(1, now),
                     bytes_[kind].Take(static_cast<double>(bytes), now),
                     bytes_[2].Take(static_cast<double>(bytes), now)});
    if (ReservedLocked()) {
      CountReservedLocked(bytes);
      // Within the reservation: no background bucket. Beyond it, while the background is held
      // back, a token of the background's that is there now, else the reservation's next one:
      // never a place behind the background's debt (the requests it holds back).
      if (WithinReservationLocked(bytes, now)) {
        background = false;
      } else if (armed && res->limiting()) {
        if (!res->TryTakeBackground()) {
          wait = std::max(wait, TakeReservationLocked(bytes, now));
        }
        background = false;
      }
    }
  }
  if (armed && background) wait = std::max(wait, res->TakeBackground());
  if (wait > absl::ZeroDuration() && delayed_ != nullptr) {
    delayed_->Increment();
    delay_seconds_->Increment(absl::ToDoubleSeconds(wait));
  }
  return wait;
}

bool VdiLimiter::TryAdmitNow(bool write, uint64_t bytes, bool* from_background) {
  Reservations* const res = reservations_.get();
  const bool armed = res != nullptr && res->armed();
  if (armed) res->MaybeTick();
  *from_background = armed;
  if (Unlimited(clock_->NowMicros())) return !armed || res->TryTakeBackground();
  absl::MutexLock l(&mu_);
  const absl::Time now = clock_->Now();
  RefreshLocked(now);
  if (!OwnTokensLocked(write, bytes, now, /*take=*/false)) return false;
  if (WithinReservationLocked(bytes, now)) {
    *from_background = false;
  } else if (armed && !res->TryTakeBackground()) {
    return false;  // a worker's Admit waits for it (a reserved VDI: for its reservation's token)
  }
  if (ReservedLocked()) CountReservedLocked(bytes);
  OwnTokensLocked(write, bytes, now, /*take=*/true);
  return true;
}

void VdiLimiter::Refund(bool write, uint64_t bytes, bool from_background) {
  if (from_background && reservations_ != nullptr) reservations_->GiveBackground();
  if (!limited_.load(std::memory_order_relaxed)) return;  // nothing else was taken
  absl::MutexLock l(&mu_);
  const int kind = write ? 1 : 0;
  ops_[kind].Give(1);
  ops_[2].Give(1);
  bytes_[kind].Give(static_cast<double>(bytes));
  bytes_[2].Give(static_cast<double>(bytes));
  if (ReservedLocked()) {
    if (window_ops_ > 0) --window_ops_;
    window_bytes_ -= std::min<uint64_t>(window_bytes_, bytes);
    if (!from_background) {
      reserve_ops_bucket_.Give(1);
      reserve_bytes_bucket_.Give(static_cast<double>(bytes));
    }
  }
}

// ---- QosRegistry ----

QosRegistry::QosRegistry(Clock* clock,
                         std::function<absl::StatusOr<v1::VdiQos>(const std::string&)> lookup)
    : clock_(clock),
      lookup_(std::move(lookup)),
      reservations_(std::make_shared<Reservations>(clock)) {}

void QosRegistry::ExportMetrics(metrics::Registry* registry) {
  reservations_->ExportMetrics(registry);
  absl::MutexLock l(&mu_);
  registry_ = registry;
}

std::shared_ptr<VdiLimiter> QosRegistry::For(const std::string& vdi) {
  absl::MutexLock l(&mu_);
  std::shared_ptr<VdiLimiter>& l_ = limiters_[vdi];
  if (!l_) {
    l_ = std::make_shared<VdiLimiter>(
        vdi, clock_, [lookup = lookup_, vdi] { return lookup(vdi); }, registry_, reservations_);
  }
  return l_;
}

std::vector<std::pair<std::string, std::shared_ptr<VdiLimiter>>> QosRegistry::All() {
  absl::MutexLock l(&mu_);
  return {limiters_.begin(), limiters_.end()};
}

// ---- QosDevice ----

void QosDevice::Wait(bool write, uint64_t bytes) {
  const absl::Duration wait = limiter_->Admit(write, bytes);
  if (wait > absl::ZeroDuration()) clock_->SleepFor(wait);
}

template <typename Op>
absl::Status QosDevice::Tracked(Op op) {
  const absl::Time started = limiter_->Start();
  absl::Status s = op();
  if (started != absl::InfinitePast()) limiter_->Finish(started);
  return s;
}

absl::Status QosDevice::Read(uint64_t offset, uint32_t len, char* buf) {
  return Tracked([&] {
    Wait(false, len);
    return inner_->Read(offset, len, buf);
  });
}

bool QosDevice::ReadAsync(uint64_t offset, uint32_t len, char* buf,
                          absl::AnyInvocable<void(absl::Status)> done) {
  // The asynchronous path cannot wait: it takes a read only when its tokens are there now, and
  // gives them back when the inner device declines it (the caller's Read then admits it).
  bool from_background = false;
  if (!limiter_->TryAdmitNow(false, len, &from_background)) return false;
  const absl::Time started = limiter_->Start();
  if (started != absl::InfinitePast()) {
    done = [limiter = limiter_, started, done = std::move(done)](absl::Status s) mutable {
      limiter->Finish(started);
      done(std::move(s));
    };
  }
  if (inner_->ReadAsync(offset, len, buf, std::move(done))) return true;
  limiter_->Refund(false, len, from_background);  // declined: `done` is never run
  return false;
}

absl::Status QosDevice::Write(uint64_t offset, uint32_t len, const char* buf, bool fua) {
  return Tracked([&] {
    Wait(true, len);
    return inner_->Write(offset, len, buf, fua);
  });
}

absl::Status QosDevice::Trim(uint64_t offset, uint32_t len) {
  return Tracked([&] {
    Wait(true, 0);
    return inner_->Trim(offset, len);
  });
}

absl::Status QosDevice::WriteZeroes(uint64_t offset, uint32_t len, bool may_trim, bool fua) {
  return Tracked([&] {
    Wait(true, 0);
    return inner_->WriteZeroes(offset, len, may_trim, fua);
  });
}

}  // namespace ringcache::gateway
