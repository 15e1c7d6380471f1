// SieveAdmission: sieve-LRU admission of paper 002 (CircularCache, docs/papers.md) §III-C.
//
// "We use a sieve-LRU queue to filter the cold data, the length of this queue is fixed and the
// sieve-LRU only store the metadata of requested data. [...] For hits in sieve-LRU, if they meet
// the condition of entrance into VBQ, the requested data is written into SSD-cache. Otherwise, the
// request will be sent to corresponding data nodes. For misses in sieve-LRU, the access metadata
// will be written into sieve-LRU."
//
// Each read miss counts one access of its key in a fixed-length LRU of keys (no data). The block is
// admitted by the read miss at which its count reaches `threshold` (count includes this access:
// threshold 1 admits everything, 2 admits the second read miss within the sieve's memory); its
// sieve entry is then dropped. Writes are not judged (write-back caches every write).
//
// Adaptive (`adapt`, issue 37, our extension): per VDI, an AdmitClimber (admit_climber.h) tunes
// the fraction of first read misses admitted at once, before the sieve has seen them twice, by
// hill climbing on hits less SSD writes at the write budget. A first miss admitted that way is not
// remembered by the sieve; the others go through the sieve as above. The choice among first
// misses is a fixed pseudo-random sequence, so that a run is repeatable.
//
// With `adapt=ghost` a RegretTuner (admit_climber.h) moves the same fraction from the sieve's own
// evidence instead: a rejected first miss that comes back while the sieve remembers it asks for
// more, a first-miss admission not read again within `horizon` accesses (or missed again first)
// asks for less.
//
// With `freq=1` (issue 37, our extension after TinyLFU's admission rule, freq_sketch.h) a first
// read miss is also admitted at once when a frequency sketch of every access says its block is
// clearly more popular than what the cache evicts now: its estimate exceeds that of a recent
// victim of its VDI (drawn from the VDI's last kVictims evictions) by more than `margin`. The bar
// follows the cache: a small cache evicts blocks that were read often, a large one blocks read
// once, so the same rule admits less in the first and more in the second.
//
// Or when its region is (paper 000's regional popularity, our rule): a second sketch counts the
// re-references (accesses of a block the block sketch has seen) per region of `region` adjacent
// blocks, aged ten times as often; a first miss in a region whose count beats a recent victim's
// region by more than `margin` is admitted too. A hot spot that moves to new blocks is seen
// before any of its blocks has been read twice; a scan re-references nothing and never passes.
// With `region_adapt` each VDI's region margin follows what the blocks the region test admitted
// did (RegionTuner below): a Zipf disk whose popular blocks are spread everywhere has warm
// regions all over, and the blocks they vouch for are evicted unread, so its margin rises; a hot
// spot's are read again, so its margin falls. Blocks neither sketch vouches for still go
// through the sieve.
//
// With `seen=1` (issue 37, our rule) the block sketch is also the sieve's memory: a missed block
// whose estimate counts an access before this one is admitted, paper 002's "admit at the second
// miss" over the sketch's memory (it ages every ten caches of accesses) instead of the sieve-LRU's
// quarter of a cache. A moving hot spot's blocks are read a second time soon, but often after the
// sieve-LRU has forgotten their first read.
//
// With `budget=B` and freq (issue 37, our rule) each VDI's admissions are held to a write budget
// of B SSD block writes per read hit: a BudgetTuner (below) follows what the blocks admitted did,
// and while they cost more than B it asks every test for one more access (the sieve's
// threshold, the seen, block and region tests' margins), while they cost well under B one less.
//
// With `writes=1` (issue 37; paper 002's sieve sends the requests it does not admit to the data
// nodes) write misses are judged too: a write of a block no test vouches for goes around the
// cache to the data nodes (write-around), and the sieve remembers it as a first miss. Here a
// cached write costs the same synchronous data-node commits as a write-around (its log replicas),
// so a block written once and never again is an SSD write and a destage for nothing.
//
// Thread-safety: not thread-safe; driven by one CacheDriver.
#ifndef RINGCACHE_CACHENODE_POLICY_SIEVE_H_
#define RINGCACHE_CACHENODE_POLICY_SIEVE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "cachenode/policy/admission.h"
#include "cachenode/policy/admit_climber.h"
#include "cachenode/policy/freq_sketch.h"
#include "cachenode/policy/key_lru.h"

namespace ringcache::policy {

struct SieveConfig {
  uint32_t threshold = 2;  // read misses of a key (counting the admitting one) needed to admit
  size_t length = 0;       // keys the sieve-LRU remembers; 0 = a quarter of the cache (README)
  // Tuning of the first-miss admission per VDI: none, AdmitClimber (`adapt=1`), or
  // RegretTuner (`adapt=ghost`).
  enum class Adapt : uint8_t { kOff, kClimb, kGhost };
  Adapt adapt = Adapt::kOff;
  ClimberConfig climber;   // with kClimb
  RegretConfig regret;     // with kGhost
  // With kGhost: a block admitted at its first miss and not read again within this many
  // accesses is a waste. REQUIRES > 0 with kGhost (the registry sets twice the cache).
  uint64_t horizon = 0;
  // The frequency gate of first misses (off by default), and how many more recent accesses than
  // a recent victim's a block needs to pass it. `capacity` sizes the sketch (the registry sets
  // the cache's blocks; REQUIRES > 0 with freq).
  bool freq = false;
  double margin = 3;
  // The region test's own margin (`region_margin`); below 0: `margin`.
  double region_margin = -1;
  // With the region test: its margin per VDI follows what the blocks it admits do
  // (`region_adapt`, RegionTuner below), starting at the one above.
  bool region_adapt = false;
  // With region_adapt: the share of its admissions wasted above which a VDI's region margin
  // rises (below half of it, the margin falls).
  double region_waste = 0.5;
  size_t capacity = 0;
  // With freq: a missed block the block sketch has seen before is admitted (`seen`).
  bool seen = false;
  // Write misses are judged as read misses are (`writes`); a refused one goes around the cache.
  bool judge_writes = false;
  // With freq: blocks per region of the region test (a power of two from 2; 0: no region test).
  uint32_t region = 64;
  // The write budget (`budget`): SSD block writes per read hit that a VDI's admissions may cost
  // (0: none). With freq, a BudgetTuner per VDI holds them to it.
  double budget = 0;
  absl::Status Validate() const;
};

// The region test's margin of one VDI, moved by what the blocks it admitted did (issue 37, our
// rule): a block read again while cached paid for its SSD write, one evicted unread did not.
// Every kWindow outcomes, more than `waste` of them wasted raises the margin by one (fewer
// admissions), fewer than half of that lowers it (more), within [kMin, kMax].
class RegionTuner {
 public:
  static constexpr uint32_t kWindow = 64;
  static constexpr double kMin = 0;
  static constexpr double kMax = 8;
  RegionTuner(double start, double waste) : margin_(start), waste_(waste) {}
  double margin() const { return margin_; }
  void OnOutcome(bool read_again);

 private:
  double margin_;
  double waste_;
  uint32_t used_ = 0;
  uint32_t wasted_ = 0;
};

// The write budget's margin of one VDI (issue 37, our rule; a cost-aware admission that counts
// SSD writes as the cost of hits). Each admission made under it is followed until it has earned
// HitsToCount(budget) read hits (it paid in full) or is evicted, and its outcome is the read hits
// it earned, for the one SSD write it cost. Every kWindow outcomes the window's writes per hit,
// outcomes / hits, is compared with the budget: above it, the margin rises by one (every test
// asks one access more); under kLower of it, the margin falls by one; within [0, kMax].
class BudgetTuner {
 public:
  static constexpr uint32_t kWindow = 64;
  static constexpr uint32_t kMax = 8;
  static constexpr double kLower = 0.75;
  explicit BudgetTuner(double budget) : budget_(budget) {}
  // The read hits after which an admission has paid in full: enough that a window of such
  // admissions is under the lowering bar (1 for a budget from 4/3 up).
  static uint32_t HitsToCount(double budget);
  uint32_t margin() const { return margin_; }
  void OnOutcome(uint32_t hits);

 private:
  double budget_;
  uint32_t margin_ = 0;
  uint32_t outcomes_ = 0;
  uint32_t hits_ = 0;
};

class SieveAdmission final : public Admission {
 public:
  // REQUIRES: config.Validate().ok() and config.length > 0.
  explicit SieveAdmission(const SieveConfig& config);

  std::string_view name() const override { return "sieve"; }
  void OnAccess(const Access& access, bool hit) override;
  bool Admit(const Access& access) override;
  bool judges_writes() const override { return config_.judge_writes; }
  // With freq: remembers the victim's estimate, the bar of the frequency gate.
  void OnEvicted(const BlockKey& key) override;
  size_t MetadataBytes() const override;
  // With adapt: each VDI's fraction of first read misses admitted at once, in its row of `rows`
  // (rows of VDIs the climber has not seen are left alone).
  void AnnotateVdiStats(absl::Span<VdiStats> rows) const override;

  // The region test's margin for `vdi` now.
  double RegionMarginForTest(uint32_t vdi) const { return RegionMarginOf(vdi); }
  size_t RegionAdmittedForTest() const { return region_admitted_.size(); }
  // The write budget's margin for `vdi` now (0 without a budget), and the admissions followed.
  uint32_t BudgetMarginForTest(uint32_t vdi) const { return BudgetMarginOf(vdi); }
  size_t BudgetFollowedForTest() const { return budgeted_.size(); }
  // Returns the count the sieve holds for `key` (0 if not remembered).
  uint32_t CountForTest(const BlockKey& key) const;
  size_t size() const { return lru_.size(); }

 private:
  AdmitClimber& ClimberOf(uint32_t vdi);
  RegretTuner& TunerOf(uint32_t vdi);
  // The current fraction of first misses to admit for `vdi` (adaptive modes only).
  double FirstMissFraction(uint32_t vdi);
  // The next number of a fixed pseudo-random sequence, uniform in [0, 1).
  double NextDraw();
  // Counts as wastes the first-miss admissions older than the horizon that were not read again.
  void ExpireProbation();
  // With freq: which test, if any, vouches for `key` against a recent victim.
  // kRoom: nothing of the VDI evicted yet, so nothing is compared.
  enum class Gate : uint8_t { kNo, kBlock, kRegion, kRoom };
  Gate FrequencyGate(const BlockKey& key, uint32_t budget_margin);
  double RegionMarginOf(uint32_t vdi) const;
  bool Budgeted() const { return config_.budget > 0 && sketch_ != nullptr; }
  uint32_t BudgetMarginOf(uint32_t vdi) const;
  // Follows an admission under the budget (its outcome goes to the VDI's BudgetTuner).
  void FollowBudgeted(const BlockKey& key);
  BlockKey RegionOf(const BlockKey& key) const {
    return BlockKey{key.vdi, key.block >> region_shift_};
  }

  // Recent victims whose estimates the frequency gate draws from.
  static constexpr size_t kVictims = 256;

  SieveConfig config_;
  KeyLru lru_;
  absl::flat_hash_map<uint32_t, AdmitClimber> climbers_;  // with kClimb, by VDI
  absl::flat_hash_map<uint32_t, RegretTuner> tuners_;      // with kGhost, by VDI
  // kGhost: blocks admitted at their first miss and not read since, with the access count at
  // their admission, and the same in admission order.
  absl::flat_hash_map<BlockKey, uint64_t> probation_;
  std::deque<std::pair<uint64_t, BlockKey>> probation_order_;
  uint64_t clock_ = 0;  // accesses seen (kGhost)
  uint64_t draws_ = 0;  // the pseudo-random sequence's position
  // With freq: the sketches of every access and of re-references per region, and per VDI the
  // estimates of its last kVictims victims and their regions (rings, oldest overwritten first).
  struct Victims {
    std::vector<uint8_t> block;
    std::vector<uint8_t> region;
    size_t next = 0;
  };
  std::unique_ptr<FreqSketch> sketch_;
  std::unique_ptr<FreqSketch> region_sketch_;  // null without the region test
  uint32_t region_shift_ = 0;
  absl::flat_hash_map<uint32_t, Victims> victims_;
  // With region_adapt: each VDI's tuner, and the blocks the region test admitted that have not
  // been read again or evicted since.
  absl::flat_hash_map<uint32_t, RegionTuner> region_tuners_;
  absl::flat_hash_set<BlockKey> region_admitted_;
  // With a budget: each VDI's tuner, and the admissions followed with the read hits each earned.
  absl::flat_hash_map<uint32_t, BudgetTuner> budget_tuners_;
  absl::flat_hash_map<BlockKey, uint8_t> budgeted_;
  uint32_t budget_hits_to_count_ = 1;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_SIEVE_H_
