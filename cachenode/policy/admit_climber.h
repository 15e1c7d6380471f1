// AdmitClimber: the online tuning of the sieve's admission (cachenode/policy/sieve.h) for one VDI.
//
// Paper 002's sieve admits a block at its second read miss within the sieve's memory. That is
// right for a small cache facing scans and one-touch blocks; a cache that holds most of the
// working set, or a hot spot that moves, loses a miss per block to it (docs/experiments.md, E7).
// The climber turns one knob, the fraction f of first read misses admitted at once (0: the
// paper's sieve; 1: admit everything), by hill climbing on what each window of accesses earned,
// the way Caffeine's adaptive W-TinyLFU sizes its window (a fact of that project; the rule here
// is ours):
//
//   score(window) = hits / accesses - (admissions / accesses) / budget
//
// `budget` is the write budget: how many SSD block writes (admissions of missed reads) one extra
// hit may cost. A window that scored at least as well as the previous one keeps the direction of
// the last step, a worse one reverses it; the step shrinks by `decay` per window down to
// `min_step`, and grows back to `step` when the hit ratio jumped by more than `restart` (the
// workload changed). Writes are cached whatever the admission says, so only read-miss admissions
// are the cost.
//
// RegretTuner (`adapt=ghost`) turns the same knob without comparing windows, from two regrets
// the sieve sees as they happen (our rule):
//   - a come-back: a first miss the sieve rejected misses again while the sieve remembers it (had
//     it been admitted, that miss would have been a hit): f += step;
//   - a waste: a block admitted at its first miss is not read again within `horizon` accesses,
//     or misses again first (it bought an SSD write and the space of a block that might have
//     hit): f -= step * k, with
//     k = 1 + 1/budget (the displaced block's hit, plus the write at the budget's price).
// Come-backs arrive at a rate (1 - f) p_c (only rejected misses can come back) and wastes at
// f p_w, so f settles where they balance: f = p_c / (p_c + k p_w). Scans (p_c near 0) drive it
// to 0, the paper's sieve; blocks that all come back (p_w near 0) drive it to 1.
//
// Thread-safety: not thread-safe; owned by one SieveAdmission.
#ifndef RINGCACHE_CACHENODE_POLICY_ADMIT_CLIMBER_H_
#define RINGCACHE_CACHENODE_POLICY_ADMIT_CLIMBER_H_

#include <cstdint>

#include "absl/status/status.h"

namespace ringcache::policy {

struct ClimberConfig {
  uint64_t window = 4096;   // accesses of the VDI per step
  double budget = 4.0;      // SSD block writes one extra hit may cost (> 0)
  double initial = 0.0;     // the fraction to start from (0: the paper's sieve)
  double step = 0.125;      // first and restart step
  double min_step = 1.0 / 64;
  double decay = 0.9;       // step *= decay after each window
  double restart = 0.05;    // hit ratio change between windows that restarts the step
  absl::Status Validate() const;
};

class AdmitClimber {
 public:
  // REQUIRES: config.Validate().ok().
  explicit AdmitClimber(const ClimberConfig& config);

  // Counts one access of the VDI; `hit`: it found its block cached. Ends a window every
  // config.window accesses and moves the fraction.
  void OnAccess(bool hit);
  // Counts one admission of a missed read (an SSD write the admission chose).
  void OnAdmit() { ++admits_; }

  // The fraction of first read misses to admit at once, in [0, 1].
  double fraction() const { return fraction_; }
  // Windows ended so far.
  uint64_t steps() const { return steps_; }

 private:
  void EndWindow();

  ClimberConfig config_;
  double fraction_;
  double step_;
  double direction_ = 1.0;  // the first step admits more
  bool have_previous_ = false;
  double previous_score_ = 0;
  double previous_hit_ratio_ = 0;
  uint64_t accesses_ = 0;
  uint64_t hits_ = 0;
  uint64_t admits_ = 0;
  uint64_t steps_ = 0;
};

struct RegretConfig {
  double budget = 4.0;      // as ClimberConfig::budget (> 0)
  double initial = 0.0;     // the fraction to start from
  double step = 1.0 / 128;  // per come-back; a waste moves it step * (1 + 1/budget)
  absl::Status Validate() const;
};

class RegretTuner {
 public:
  // REQUIRES: config.Validate().ok().
  explicit RegretTuner(const RegretConfig& config)
      : fraction_(config.initial), up_(config.step), down_(config.step * (1 + 1 / config.budget)) {}

  void OnComeBack();
  void OnWaste();
  double fraction() const { return fraction_; }
  uint64_t comebacks() const { return comebacks_; }
  uint64_t wastes() const { return wastes_; }

 private:
  double fraction_;
  double up_, down_;
  uint64_t comebacks_ = 0;
  uint64_t wastes_ = 0;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_ADMIT_CLIMBER_H_
