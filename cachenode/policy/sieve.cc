// SieveAdmission: see sieve.h (paper 002 §III-C).
#include "cachenode/policy/sieve.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ringcache::policy {

absl::Status SieveConfig::Validate() const {
  if (threshold < 1 || threshold > 255) {
    return absl::InvalidArgumentError("sieve: threshold must be in [1, 255]");
  }
  if (length >= kNoSlot) return absl::InvalidArgumentError("sieve: len too large");
  if (!(margin >= 0 && margin <= FreqSketch::kMaxCount)) {
    return absl::InvalidArgumentError("sieve: margin must be in [0, 15]");
  }
  if (!(region_margin <= FreqSketch::kMaxCount)) {
    return absl::InvalidArgumentError("sieve: region_margin must be at most 15");
  }
  if (!(region_waste > 0 && region_waste < 1)) {
    return absl::InvalidArgumentError("sieve: region_waste must be in (0, 1)");
  }
  if (!(budget >= 0 && budget <= 1000)) {
    return absl::InvalidArgumentError(
        "sieve: budget (SSD writes per read hit) must be in [0, 1000] (0: none)");
  }
  if (budget > 0 && !freq && adapt == Adapt::kOff) {
    return absl::InvalidArgumentError(
        "sieve: budget needs freq=1 (the admissions it tunes) or adapt (the climber's)");
  }
  if (freq && capacity == 0) return absl::InvalidArgumentError("sieve: freq needs a capacity");
  if (seen && !freq) return absl::InvalidArgumentError("sieve: seen needs freq=1 (its sketch)");
  if (region == 1 || (region & (region - 1)) != 0 || region > (1u << 20)) {
    return absl::InvalidArgumentError(
        "sieve: region must be 0 (no region test) or a power of two from 2 to 2^20 blocks");
  }
  switch (adapt) {
    case Adapt::kOff:
      return absl::OkStatus();
    case Adapt::kClimb:
      return climber.Validate();
    case Adapt::kGhost:
      if (horizon == 0) return absl::InvalidArgumentError("sieve: horizon must be > 0");
      return regret.Validate();
  }
  return absl::OkStatus();
}

SieveAdmission::SieveAdmission(const SieveConfig& config)
    : config_(config),
      lru_(config.length),
      budget_hits_to_count_(config.budget > 0 ? BudgetTuner::HitsToCount(config.budget) : 1) {
  if (!config.freq) return;
  sketch_ = std::make_unique<FreqSketch>(config.capacity);
  if (config.region > 0) {
    while ((1u << region_shift_) < config.region) ++region_shift_;
    // Fewer keys than blocks (regions that are re-referenced), aged every ten capacities of
    // regions: a region's count is about its recent past, as a hot spot's needs.
    const size_t regions = std::max<size_t>(64, config.capacity / config.region);
    region_sketch_ = std::make_unique<FreqSketch>(std::max<size_t>(64, config.capacity / 16),
                                                  10 * uint64_t{regions});
  }
}

AdmitClimber& SieveAdmission::ClimberOf(uint32_t vdi) {
  return climbers_.try_emplace(vdi, config_.climber).first->second;
}

RegretTuner& SieveAdmission::TunerOf(uint32_t vdi) {
  return tuners_.try_emplace(vdi, config_.regret).first->second;
}

double SieveAdmission::FirstMissFraction(uint32_t vdi) {
  return config_.adapt == SieveConfig::Adapt::kClimb ? ClimberOf(vdi).fraction()
                                                     : TunerOf(vdi).fraction();
}

double SieveAdmission::NextDraw() {
  // splitmix64 of the draw count: a uniform number in [0, 1), the same in every run.
  uint64_t z = (++draws_) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

void SieveAdmission::ExpireProbation() {
  while (!probation_order_.empty() && probation_order_.front().first + config_.horizon <= clock_) {
    const auto [admitted, key] = probation_order_.front();
    probation_order_.pop_front();
    auto it = probation_.find(key);
    if (it == probation_.end() || it->second != admitted) continue;  // read since, or readmitted
    probation_.erase(it);
    TunerOf(key.vdi).OnWaste();
  }
}

void SieveAdmission::OnEvicted(const BlockKey& key) {
  if (sketch_ == nullptr) return;
  // Evicted before it paid in full: its outcome is the hits it earned.
  if (!budgeted_.empty()) {
    if (auto it = budgeted_.find(key); it != budgeted_.end()) {
      budget_tuners_.at(key.vdi).OnOutcome(it->second);
      budgeted_.erase(it);
    }
  }
  // Evicted unread since the region test admitted it: an SSD write for nothing.
  if (!region_admitted_.empty() && region_admitted_.erase(key) > 0) {
    region_tuners_.at(key.vdi).OnOutcome(false);
  }
  const auto f = static_cast<uint8_t>(sketch_->Estimate(key));
  const auto r =
      static_cast<uint8_t>(region_sketch_ ? region_sketch_->Estimate(RegionOf(key)) : 0);
  Victims& v = victims_[key.vdi];
  if (v.block.size() < kVictims) {
    v.block.push_back(f);
    v.region.push_back(r);
  } else {
    v.block[v.next] = f;
    v.region[v.next] = r;
    v.next = (v.next + 1) % kVictims;
  }
}

double SieveAdmission::RegionMarginOf(uint32_t vdi) const {
  if (config_.region_adapt) {
    if (auto it = region_tuners_.find(vdi); it != region_tuners_.end()) {
      return it->second.margin();
    }
  }
  return config_.region_margin >= 0 ? config_.region_margin : config_.margin;
}

uint32_t SieveAdmission::BudgetMarginOf(uint32_t vdi) const {
  if (!Budgeted()) return 0;
  auto it = budget_tuners_.find(vdi);
  return it == budget_tuners_.end() ? 0 : it->second.margin();
}

void SieveAdmission::FollowBudgeted(const BlockKey& key) {
  budget_tuners_.try_emplace(key.vdi, config_.budget);
  // As region_admitted_: blocks that leave unseen (trimmed, invalidated) are dropped wholesale
  // past twice the cache's blocks.
  if (budgeted_.size() >= 2 * config_.capacity) budgeted_.clear();
  budgeted_[key] = 0;
}

uint32_t BudgetTuner::HitsToCount(double budget) {
  return static_cast<uint32_t>(std::clamp(std::ceil(1 / (kLower * budget)), 1.0, 255.0));
}

void BudgetTuner::OnOutcome(uint32_t hits) {
  ++outcomes_;
  hits_ += hits;
  if (outcomes_ < kWindow) return;
  // Writes per hit of the window: one SSD write per admission, over the hits they earned.
  const double cost = hits_ == 0 ? budget_ + 1 : static_cast<double>(outcomes_) / hits_;
  if (cost > budget_ && margin_ < kMax) ++margin_;
  if (cost < kLower * budget_ && margin_ > 0) --margin_;
  outcomes_ = hits_ = 0;
}

SieveAdmission::Gate SieveAdmission::FrequencyGate(const BlockKey& key, uint32_t budget_margin) {
  // Nothing of the VDI evicted yet: its queue has room, and a block admitted displaces nothing
  // of its own.
  auto it = victims_.find(key.vdi);
  if (it == victims_.end()) return Gate::kRoom;
  // TinyLFU admits a block more frequent than the victim it replaces; VBQ's rounds choose
  // victims after admission, so the comparison is with a victim of the recent past instead.
  const Victims& v = it->second;
  const auto draw = [&] {
    return static_cast<size_t>(NextDraw() * static_cast<double>(v.block.size()));
  };
  if (sketch_->Estimate(key) > v.block[draw()] + config_.margin + budget_margin) {
    return Gate::kBlock;
  }
  if (region_sketch_ != nullptr &&
      region_sketch_->Estimate(RegionOf(key)) >
          v.region[draw()] + RegionMarginOf(key.vdi) + budget_margin) {
    return Gate::kRegion;
  }
  return Gate::kNo;
}

void RegionTuner::OnOutcome(bool read_again) {
  ++used_;
  if (!read_again) ++wasted_;
  if (used_ < kWindow) return;
  const double waste = static_cast<double>(wasted_) / used_;
  if (waste > waste_) margin_ = std::min(kMax, margin_ + 1);
  if (waste < waste_ / 2) margin_ = std::max(kMin, margin_ - 1);
  used_ = wasted_ = 0;
}

void SieveAdmission::OnAccess(const Access& access, bool hit) {
  // A block the region test admitted, read again while cached: the admission paid.
  if (hit && access.op == Op::kRead && !region_admitted_.empty() &&
      region_admitted_.erase(access.key) > 0) {
    region_tuners_.at(access.key.vdi).OnOutcome(true);
  }
  // A read hit of an admission under the budget; once it has paid in full, its outcome.
  if (hit && access.op == Op::kRead && !budgeted_.empty()) {
    if (auto it = budgeted_.find(access.key); it != budgeted_.end()) {
      if (++it->second >= budget_hits_to_count_) {
        budget_tuners_.at(access.key.vdi).OnOutcome(it->second);
        budgeted_.erase(it);
      }
    }
  }
  if (sketch_ != nullptr) {
    // A re-reference (the block seen before) counts for its region.
    if (region_sketch_ != nullptr && sketch_->Estimate(access.key) > 0) {
      region_sketch_->Increment(RegionOf(access.key));
    }
    sketch_->Increment(access.key);
  }
  switch (config_.adapt) {
    case SieveConfig::Adapt::kOff:
      return;
    case SieveConfig::Adapt::kClimb:
      ClimberOf(access.key.vdi).OnAccess(hit);
      return;
    case SieveConfig::Adapt::kGhost:
      ++clock_;
      // A read hit pays a first-miss admission off (a write would have been cached anyway).
      if (hit && access.op == Op::kRead && !probation_.empty()) probation_.erase(access.key);
      ExpireProbation();
      return;
  }
}

bool SieveAdmission::Admit(const Access& access) {
  if (config_.threshold <= 1) return true;
  // The write budget's margin: every test below asks for this many accesses more.
  const uint32_t extra = BudgetMarginOf(access.key.vdi);
  const auto admitted = [&] {
    if (Budgeted()) FollowBudgeted(access.key);
    return true;
  };
  // Seen before (OnAccess counted this access already): its second access within the sketch's
  // memory, the sieve's threshold-2 rule over a longer memory.
  if (config_.seen && sketch_->Estimate(access.key) > 1 + extra) return admitted();
  const SlotId e = lru_.Find(access.key);
  if (e == kNoSlot) {
    // Vouched for by the sketch: more popular than what the cache evicts.
    if (sketch_ != nullptr) {
      const Gate gate = FrequencyGate(access.key, extra);
      if (gate == Gate::kRoom) return true;
      if (gate == Gate::kRegion && config_.region_adapt) {
        region_tuners_.try_emplace(access.key.vdi, RegionMarginOf(access.key.vdi),
                                   config_.region_waste);
        // Blocks that leave without an eviction (trimmed, invalidated, a VDI deleted) are not
        // seen leaving: past twice the cache's blocks the set holds such leftovers, and starts
        // again (the tuners keep their margins).
        if (region_admitted_.size() >= 2 * config_.capacity) region_admitted_.clear();
        region_admitted_.insert(access.key);
      }
      if (gate != Gate::kNo) return admitted();
    }
    if (config_.adapt != SieveConfig::Adapt::kOff) {
      // (kGhost) a first-miss admission missed again before any read hit: it left the cache
      // without paying for its write, a waste found before the horizon.
      if (!probation_.empty() && probation_.erase(access.key) > 0) {
        TunerOf(access.key.vdi).OnWaste();
      }
      if (NextDraw() < FirstMissFraction(access.key.vdi)) {
        if (config_.adapt == SieveConfig::Adapt::kClimb) {
          ClimberOf(access.key.vdi).OnAdmit();
        } else {
          probation_[access.key] = clock_;
          probation_order_.emplace_back(clock_, access.key);
        }
        return true;  // admitted at its first miss: the sieve need not remember it
      }
    }
    // Miss in the sieve-LRU: remember the access (count 1), send the read to the data node.
    lru_.PushFront(access.key, 1);
    return false;
  }
  const uint32_t count = lru_.tag(e) + 1u;
  // A rejected first miss came back while remembered: that miss would have been a hit.
  if (count == 2 && config_.adapt == SieveConfig::Adapt::kGhost) {
    TunerOf(access.key.vdi).OnComeBack();
  }
  if (count >= config_.threshold + extra) {
    // Hit meeting the entrance condition: the block goes into the cache, the sieve forgets it.
    lru_.Erase(e);
    if (config_.adapt == SieveConfig::Adapt::kClimb) ClimberOf(access.key.vdi).OnAdmit();
    return admitted();
  }
  lru_.set_tag(e, static_cast<uint8_t>(std::min<uint32_t>(count, 255)));
  lru_.MoveToFront(e);
  return false;
}

size_t SieveAdmission::MetadataBytes() const {
  return sizeof(*this) + lru_.MemoryBytes() +
         climbers_.capacity() * (sizeof(uint32_t) + sizeof(AdmitClimber) + 1) +
         tuners_.capacity() * (sizeof(uint32_t) + sizeof(RegretTuner) + 1) +
         probation_.capacity() * (sizeof(BlockKey) + sizeof(uint64_t) + 1) +
         probation_order_.size() * sizeof(std::pair<uint64_t, BlockKey>) +
         (sketch_ != nullptr ? sketch_->MemoryBytes() : 0) +
         (region_sketch_ != nullptr ? region_sketch_->MemoryBytes() : 0) +
         region_tuners_.capacity() * (sizeof(uint32_t) + sizeof(RegionTuner) + 1) +
         region_admitted_.capacity() * (sizeof(BlockKey) + 1) +
         budget_tuners_.capacity() * (sizeof(uint32_t) + sizeof(BudgetTuner) + 1) +
         budgeted_.capacity() * (sizeof(BlockKey) + sizeof(uint8_t) + 1) +
         victims_.capacity() * (sizeof(uint32_t) + sizeof(Victims) + 2 * kVictims + 1);
}

void SieveAdmission::AnnotateVdiStats(absl::Span<VdiStats> rows) const {
  for (VdiStats& row : rows) {
    if (auto it = climbers_.find(row.vdi); it != climbers_.end()) {
      row.admit_first = it->second.fraction();
    }
    if (auto it = tuners_.find(row.vdi); it != tuners_.end()) row.admit_first = it->second.fraction();
    if (auto it = region_tuners_.find(row.vdi); it != region_tuners_.end()) {
      row.region_margin = it->second.margin();
    }
    if (auto it = budget_tuners_.find(row.vdi); it != budget_tuners_.end()) {
      row.budget_margin = it->second.margin();
    }
    if (auto it = victims_.find(row.vdi); it != victims_.end()) {
      const std::vector<uint8_t>& b = it->second.block;
      row.admit_bar = static_cast<double>(std::accumulate(b.begin(), b.end(), 0u)) /
                      static_cast<double>(b.size());
    }
  }
}

uint32_t SieveAdmission::CountForTest(const BlockKey& key) const {
  const SlotId e = lru_.Find(key);
  return e == kNoSlot ? 0 : lru_.tag(e);
}

}  // namespace ringcache::policy
