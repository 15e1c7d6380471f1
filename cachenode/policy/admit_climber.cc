// AdmitClimber: see admit_climber.h.
#include "cachenode/policy/admit_climber.h"

#include <algorithm>
#include <cmath>

namespace ringcache::policy {

absl::Status ClimberConfig::Validate() const {
  if (window < 16) return absl::InvalidArgumentError("sieve: window must be >= 16 accesses");
  if (!(budget > 0)) return absl::InvalidArgumentError("sieve: budget must be > 0");
  if (!(initial >= 0 && initial <= 1)) {
    return absl::InvalidArgumentError("sieve: start must be in [0, 1]");
  }
  if (!(min_step > 0 && step >= min_step && step <= 1)) {
    return absl::InvalidArgumentError("sieve: steps must satisfy 0 < min_step <= step <= 1");
  }
  if (!(decay > 0 && decay <= 1)) return absl::InvalidArgumentError("sieve: decay in (0, 1]");
  if (!(restart > 0)) return absl::InvalidArgumentError("sieve: restart must be > 0");
  return absl::OkStatus();
}

AdmitClimber::AdmitClimber(const ClimberConfig& config)
    : config_(config), fraction_(config.initial), step_(config.step) {}

void AdmitClimber::OnAccess(bool hit) {
  ++accesses_;
  if (hit) ++hits_;
  if (accesses_ >= config_.window) EndWindow();
}

void AdmitClimber::EndWindow() {
  const double n = static_cast<double>(accesses_);
  const double hit_ratio = static_cast<double>(hits_) / n;
  // The window's score: hits earned, less the SSD writes spent at `budget` writes per hit.
  const double score = hit_ratio - (static_cast<double>(admits_) / n) / config_.budget;
  if (have_previous_) {
    if (score < previous_score_) direction_ = -direction_;
    step_ = std::abs(hit_ratio - previous_hit_ratio_) > config_.restart
                ? config_.step
                : std::max(config_.min_step, step_ * config_.decay);
  }
  fraction_ = std::clamp(fraction_ + direction_ * step_, 0.0, 1.0);
  // At a bound, the next step can only come back.
  if (fraction_ == 0.0) direction_ = 1.0;
  if (fraction_ == 1.0) direction_ = -1.0;
  have_previous_ = true;
  previous_score_ = score;
  previous_hit_ratio_ = hit_ratio;
  accesses_ = hits_ = admits_ = 0;
  ++steps_;
}

absl::Status RegretConfig::Validate() const {
  if (!(budget > 0)) return absl::InvalidArgumentError("sieve: budget must be > 0");
  if (!(initial >= 0 && initial <= 1)) {
    return absl::InvalidArgumentError("sieve: start must be in [0, 1]");
  }
  if (!(step > 0 && step <= 1)) return absl::InvalidArgumentError("sieve: step in (0, 1]");
  return absl::OkStatus();
}

void RegretTuner::OnComeBack() {
  ++comebacks_;
  fraction_ = std::min(1.0, fraction_ + up_);
}

void RegretTuner::OnWaste() {
  ++wastes_;
  fraction_ = std::max(0.0, fraction_ - down_);
}

}  // namespace ringcache::policy
