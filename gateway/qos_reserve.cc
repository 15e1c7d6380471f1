#include "gateway/qos_reserve.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace ringcache::gateway {

// ---- ReservationControl ----

double ReservationControl::Step(const std::vector<Sample>& reserved, uint64_t background_ops,
                                absl::Duration window, Remote remote) {
  const double secs = std::max(absl::ToDoubleSeconds(window), 1e-3);
  const double background = static_cast<double>(background_ops) / secs;
  shorts_ = 0;
  short_.assign(reserved.size(), false);
  bool slow = false;   // a VDI below its reservation is slower than kFast x its best
  bool below = false;  // a VDI is below its reservation
  for (auto& [key, best] : best_) best.seen = false;
  for (size_t i = 0; i < reserved.size(); ++i) {
    const Sample& s = reserved[i];
    if (s.reserve_iops <= 0 && s.reserve_bytes_per_s <= 0) continue;
    Best& best = best_[s.key];
    best.seen = true;
    if (s.done < kMinDone) continue;  // (nearly) idle: it had what it asked for
    const double mean = absl::ToDoubleSeconds(s.latency) / static_cast<double>(s.done);
    ++best.age;
    if (best.seconds == 0 || mean < best.seconds || best.age > kBestWindows) {
      best.seconds = mean;
      best.age = 0;
    }
    // Below either of its reservations (requests, bytes per second).
    const bool below_ops = s.reserve_iops > 0 &&
                           static_cast<double>(s.ops) / secs < s.reserve_iops * kShortShare;
    const bool below_bytes =
        s.reserve_bytes_per_s > 0 &&
        static_cast<double>(s.bytes) / secs < s.reserve_bytes_per_s * kShortShare;
    if (!below_ops && !below_bytes) continue;
    below = true;
    if (mean > kFast * best.seconds) slow = true;
    if (mean > kSlow * best.seconds) {
      short_[i] = true;
      ++shorts_;
    }
  }
  absl::erase_if(best_, [](const auto& kv) { return !kv.second.seen; });
  if (probing_ > 0) {
    // The background is held back: the window taught the VDIs their best times. The window
    // after the probe decides afresh.
    shorts_ = 0;
    short_.assign(reserved.size(), false);
    rate_ = --probing_ > 0 ? rate_ : 0;
    return rate_;
  }
  if (shorts_ > 0 || remote.cut) {
    // Multiplicative decrease, from what the background did get when that is below the rate
    // (a bucket set above the background's use would hold nothing back).
    const double from = rate_ > 0 ? std::min(rate_, background) : background;
    rate_ = std::max(kMinBackgroundIops, from * kDecrease);
    unheld_ = 0;
  } else if (rate_ > 0) {
    if (!slow && !remote.short_now) {
      rate_ = rate_ * kIncrease + kIncreaseIops;
      // Far above what the background uses: the bucket no longer holds anything back.
      if (rate_ > 2 * background + 2 * kIncreaseIops) rate_ = 0;
    }
    unheld_ = 0;
  } else if (below && ++unheld_ >= (probed_ ? kProbeEvery : kProbeAfter)) {
    unheld_ = 0;
    probed_ = true;
    probing_ = kProbeWindows;
    rate_ = std::max(kMinBackgroundIops, background * kProbeShare);
  } else if (!below) {
    unheld_ = 0;
  }
  return rate_;
}

// ---- Reservations ----

void Reservations::ExportMetrics(metrics::Registry* registry) {
  rate_gauge_ = registry->GetGauge(
      "ringcache_gateway_qos_background_iops_limit",
      "The rate the gateway holds the VDIs without a reservation (and reserved VDIs beyond "
      "theirs) to while a reserved VDI gets less than its reservation; 0: none.");
}

void Reservations::SetRemoteShort(bool remote_short) {
  remote_short_.store(remote_short, std::memory_order_relaxed);
  if (remote_short) remote_cut_.store(true, std::memory_order_relaxed);
  absl::MutexLock l(&mu_);
  ArmLocked();
}

void Reservations::ArmLocked() {
  const bool remote = remote_short_.load(std::memory_order_relaxed);
  armed_.store(!reserved_.empty() || remote, std::memory_order_relaxed);
  if (reserved_.empty() && !remote) {  // nothing to hold the others back for (the next tick resets)
    limiting_.store(false, std::memory_order_relaxed);
    background_.Set(0, 1, clock_->Now());
  }
}

void Reservations::Track(const std::weak_ptr<VdiLimiter>& limiter, bool reserved) {
  absl::MutexLock l(&mu_);
  const std::shared_ptr<VdiLimiter> self = limiter.lock();
  std::erase_if(reserved_, [&](const std::weak_ptr<VdiLimiter>& w) {
    const std::shared_ptr<VdiLimiter> other = w.lock();
    return other == nullptr || other == self;
  });
  if (reserved && self != nullptr) reserved_.push_back(limiter);
  ArmLocked();
}

absl::Duration Reservations::TakeBackground() {
  background_ops_.fetch_add(1, std::memory_order_relaxed);
  if (!limiting()) return absl::ZeroDuration();
  absl::MutexLock l(&mu_);
  return background_.Take(1, clock_->Now());
}

bool Reservations::TryTakeBackground() {
  if (!limiting()) {
    background_ops_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  absl::MutexLock l(&mu_);
  const absl::Time now = clock_->Now();
  if (!background_.Has(1, now)) return false;
  background_.Take(1, now);
  background_ops_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void Reservations::GiveBackground() {
  background_ops_.fetch_sub(1, std::memory_order_relaxed);  // may dip below 0 after a tick
  absl::MutexLock l(&mu_);
  background_.Give(1);
}

void Reservations::MaybeTick() {
  const int64_t now_us = clock_->NowMicros();
  if (now_us < next_tick_us_.load(std::memory_order_relaxed)) return;
  if (!tick_mu_.TryLock()) return;  // another request runs it
  const absl::Time now = absl::FromUnixMicros(now_us);
  if (now_us >= next_tick_us_.load(std::memory_order_relaxed)) {
    next_tick_us_.store(now_us + absl::ToInt64Microseconds(kReserveWindow),
                        std::memory_order_relaxed);
    Tick(now);
  }
  tick_mu_.Unlock();
}

void Reservations::Tick(absl::Time now) {
  tick_mu_.AssertHeld();
  const absl::Time since = last_tick_;
  last_tick_ = now;
  std::vector<std::shared_ptr<VdiLimiter>> limiters;
  {
    absl::MutexLock l(&mu_);
    for (const auto& w : reserved_) {
      if (auto p = w.lock()) limiters.push_back(std::move(p));
    }
  }
  const bool remote_short = remote_short_.load(std::memory_order_relaxed);
  if (limiters.empty() && !remote_short && control_.rate() > 0) {
    control_ = ReservationControl();  // nothing left to hold the background back for
  }
  // Every limiter's counts start from this tick, also after a quiet spell with no tick.
  std::vector<ReservationControl::Sample> samples;
  for (const auto& limiter : limiters) samples.push_back(limiter->TakeSample(now));
  const uint64_t background = static_cast<uint64_t>(
      std::max<int64_t>(0, background_ops_.exchange(0, std::memory_order_relaxed)));
  const absl::Duration window = now - since;
  // A first tick, or one after more than two windows without a request: the counts do not
  // cover one window, so they steer nothing.
  if (since == absl::InfinitePast() || window > 2 * kReserveWindow) return;
  ReservationControl::Remote remote;
  remote.short_now = remote_short;
  remote.cut = remote_cut_.exchange(false, std::memory_order_relaxed);
  const double before = control_.rate();
  const bool was_probing = control_.probing();
  const double rate = control_.Step(samples, background, window, remote);
  if (control_.shorts() > 0) short_since_round_.store(true, std::memory_order_relaxed);
  for (size_t i = 0; i < samples.size(); ++i) {
    if (control_.short_samples()[i] && limiters[i]->short_windows_ != nullptr) {
      limiters[i]->short_windows_->Increment();
    }
  }
  if (rate != before || (rate > 0) != limiting()) {
    absl::MutexLock l(&mu_);
    background_.Set(rate, std::max(1.0, rate * absl::ToDoubleSeconds(kReserveWindow)), now);
    limiting_.store(rate > 0, std::memory_order_relaxed);
  }
  if (rate_gauge_ != nullptr) rate_gauge_->Set(rate);
  if (before == 0 && rate > 0 && !control_.probing()) {
    spdlog::info(
        "I/O reservations: {} VDI(s) got less than their reservation, slowed by the others; "
        "holding the other VDIs' requests to {:.0f}/s on this gateway (they made {:.0f}/s)",
        control_.shorts(), rate, static_cast<double>(background) / absl::ToDoubleSeconds(window));
  } else if (before > 0 && rate == 0 && !was_probing) {
    spdlog::info("I/O reservations: every reserved VDI gets its reservation; no longer holding "
                 "the other VDIs back");
  }
}

double Reservations::background_rate() {
  absl::MutexLock l(&tick_mu_);
  return control_.rate();
}

}  // namespace ringcache::gateway
