// IARC, GARC and UARC: the two-level RAM/SSD ARC caches of paper 001 §III-A2, built on TierArc.
// Rules per access are documented on each OnAccess and summarised in README_tiering.md.
// Not thread-safe (see types.h).
#include "cachenode/policy/tiering.h"

#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cachenode/policy/tier_arc.h"

namespace ringcache::policy {

absl::Status TierConfig::Validate() const {
  if (ram_blocks < 1) {
    return absl::InvalidArgumentError("TierConfig.ram_blocks must be at least 1");
  }
  if (ssd_blocks < 1) {
    return absl::InvalidArgumentError("TierConfig.ssd_blocks must be at least 1");
  }
  if (ram_blocks > kMaxBlocks || ssd_blocks > kMaxBlocks - ram_blocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("TierConfig.ram_blocks + ssd_blocks = ", ram_blocks, " + ", ssd_blocks,
                     " exceeds the supported maximum of ", kMaxBlocks, " blocks"));
  }
  return absl::OkStatus();
}

namespace {

void Report(const TierArc::Victim& v, Outcome* out) {
  out->evicted.push_back(Eviction{v.key, v.dirty, v.from});
}

// ---------------------------------------------------------------------------------------------
// IARC (paper 001 §III-A2, Fig. 1a): "two separate instances of ARC, one per level. Each
// instance maintains its own T-lists and B-lists and performs cache replacement independent of
// the other. Both ARC levels cache data on each cache miss."
//   Read, RAM hit:   RAM ARC hit. The SSD ARC does not see the request.
//   Read, RAM miss:  the request is forwarded to the SSD ARC (an SSD ARC hit, or an SSD ARC
//                    miss that allocates the block there: one SSD write); then the RAM ARC
//                    allocates it. An SSD hit counts one promotion.
//   Write:           allocated in RAM only, dirty (§IV-A: "dirty data should always be allocated
//                    in RAM ARC and be demoted to SSD ARC during eviction"). An SSD copy is left
//                    as it is — stale (§IV-A: "IARC leaves it unmodified").
//   RAM eviction:    clean -> silently dropped; dirty -> written to the SSD ARC (one SSD write,
//                    processed as an SSD ARC request: hit or allocation, the copy becomes dirty).
//   SSD eviction:    a dirty SSD copy is reported (dirty = true) even if RAM still holds the
//                    block: that is the wasted HDD flush of a stale copy that §IV-A charges to
//                    IARC. A clean SSD copy is reported only if RAM does not hold the block.
// Dirty state is kept per copy: a copy read up from a dirty SSD copy starts clean in RAM (the SSD
// copy stays responsible for the write-back). MarkClean/Erase act on both copies. size() and
// dirty_count() count copies (slots in use), so a block held twice counts twice.
class Iarc final : public TieredCache {
 public:
  explicit Iarc(const TierConfig& c)
      : ram_(c.ram_blocks, c.ram_blocks, Tier::kRam, Tier::kRam),
        ssd_(c.ssd_blocks, c.ssd_blocks, Tier::kSsd, Tier::kSsd) {}

  std::string_view name() const override { return "iarc"; }
  TierScheme scheme() const override { return TierScheme::kInclusive; }

  void OnAccess(const Access& a, Outcome* out) override {
    out->Reset();
    const bool write = a.op == Op::kWrite;
    if (ram_.RequestIfResident(a.key, write, &r_)) {
      out->hit = Tier::kRam;
      return;
    }
    if (write) {
      out->hit = ssd_.Where(a.key);
      out->admitted = out->hit == Tier::kNone;
    } else {
      ssd_.Request(a.key, /*dirty=*/false, &r_);
      if (r_.found == Tier::kSsd) {
        out->hit = Tier::kSsd;
        out->promotions = 1;
      } else {
        out->admitted = true;
        out->ssd_writes = 1;  // fill of the SSD level
      }
      if (r_.evicted) OnSsdVictim(r_.victim, out);
    }
    ram_.Request(a.key, write, &r_);
    if (r_.evicted) OnRamVictim(r_.victim, out);
  }

  bool MarkClean(const BlockKey& key) override {
    const bool in_ram = ram_.MarkClean(key);
    const bool in_ssd = ssd_.MarkClean(key);
    return in_ram || in_ssd;
  }
  bool Erase(const BlockKey& key) override {
    const bool in_ram = ram_.Remove(key, nullptr);
    const bool in_ssd = ssd_.Remove(key, nullptr);
    return in_ram || in_ssd;
  }
  Tier Lookup(const BlockKey& key) const override {
    if (ram_.Resident(key)) return Tier::kRam;
    return ssd_.Where(key);
  }
  bool Holds(const BlockKey& key, Tier tier) const override {
    if (tier == Tier::kRam) return ram_.Resident(key);
    if (tier == Tier::kSsd) return ssd_.Resident(key);
    return false;
  }
  size_t size() const override { return ram_.resident() + ssd_.resident(); }
  size_t capacity() const override { return ram_.capacity() + ssd_.capacity(); }
  size_t dirty_count() const override { return ram_.dirty_count() + ssd_.dirty_count(); }
  size_t MetadataBytes() const override {
    return sizeof(*this) + ram_.MetadataBytes() + ssd_.MetadataBytes();
  }
  size_t ram_size() const override { return ram_.resident(); }
  size_t ssd_size() const override { return ssd_.resident(); }
  bool CheckInvariantsForTest() const override {
    return ram_.CheckInvariantsForTest() && ssd_.CheckInvariantsForTest();
  }

 private:
  void OnRamVictim(const TierArc::Victim& v, Outcome* out) {
    if (v.dirty) {
      // Dirty RAM victim: written to the SSD ARC (paper 001 §III-A2, "If the target is dirty,
      // both variants write the block to the SSD ARC").
      ssd_.Request(v.key, /*dirty=*/true, &r2_);
      ++out->ssd_writes;
      if (r2_.evicted) OnSsdVictim(r2_.victim, out);
    } else if (!ssd_.Resident(v.key)) {
      Report(v, out);  // clean and held nowhere else: it left the cache
    }
  }
  void OnSsdVictim(const TierArc::Victim& v, Outcome* out) {
    if (v.dirty || !ram_.Resident(v.key)) Report(v, out);
  }

  TierArc ram_;
  TierArc ssd_;
  TierArc::Result r_, r2_;
};

// ---------------------------------------------------------------------------------------------
// GARC (paper 001 §II and §III-A2, Fig. 1b): two independent ARC instances, exclusive.
//   RAM hit:         RAM ARC hit.
//   RAM miss, SSD hit: the block is deleted from the SSD ARC (§II: "any first-level read miss
//                    that finds the data cached at the second level results in the data being
//                    deleted from the second level") and allocated by the RAM ARC as a RAM miss
//                    (its B1/B2 adapt the RAM ARC's p: "a second level hit is still a first level
//                    miss"). A read counts one promotion; the block keeps its dirty bit.
//   Miss:            allocated in the RAM ARC only.
//   Write:           like a read, but no promotion (nothing is read from SSD) and the block is
//                    dirty; an SSD copy is invalidated, keeping exclusivity.
//   RAM eviction:    every RAM victim, clean or dirty, is demoted to the SSD ARC (one SSD write)
//                    and enters it as an SSD ARC request: into T1, or into T2 after an SSD ghost
//                    hit — the T1/T2 membership it had in RAM is lost (§III-A2).
//   SSD eviction:    the block leaves the cache; reported with its dirty bit.
// Choice: deleting a block from the SSD ARC on promotion leaves no SSD ghost (it was not
// evicted).
class Garc final : public TieredCache {
 public:
  explicit Garc(const TierConfig& c)
      : ram_(c.ram_blocks, c.ram_blocks, Tier::kRam, Tier::kRam),
        ssd_(c.ssd_blocks, c.ssd_blocks, Tier::kSsd, Tier::kSsd) {}

  std::string_view name() const override { return "garc"; }
  TierScheme scheme() const override { return TierScheme::kGlobal; }

  void OnAccess(const Access& a, Outcome* out) override {
    out->Reset();
    const bool write = a.op == Op::kWrite;
    if (ram_.RequestIfResident(a.key, write, &r_)) {
      out->hit = Tier::kRam;
      return;
    }
    bool dirty = write;
    bool ssd_dirty = false;
    if (ssd_.Remove(a.key, &ssd_dirty)) {
      out->hit = Tier::kSsd;
      if (!write) out->promotions = 1;
      dirty |= ssd_dirty;
    } else {
      out->admitted = true;
    }
    ram_.Request(a.key, dirty, &r_);
    if (r_.evicted) {
      ssd_.Request(r_.victim.key, r_.victim.dirty, &r2_);  // demotion
      ++out->ssd_writes;
      if (r2_.evicted) Report(r2_.victim, out);
    }
  }

  bool MarkClean(const BlockKey& key) override {
    return ram_.MarkClean(key) || ssd_.MarkClean(key);
  }
  bool Erase(const BlockKey& key) override {
    return ram_.Remove(key, nullptr) || ssd_.Remove(key, nullptr);
  }
  Tier Lookup(const BlockKey& key) const override {
    if (ram_.Resident(key)) return Tier::kRam;
    return ssd_.Where(key);
  }
  bool Holds(const BlockKey& key, Tier tier) const override {
    if (tier == Tier::kRam) return ram_.Resident(key);
    if (tier == Tier::kSsd) return ssd_.Resident(key);
    return false;
  }
  size_t size() const override { return ram_.resident() + ssd_.resident(); }
  size_t capacity() const override { return ram_.capacity() + ssd_.capacity(); }
  size_t dirty_count() const override { return ram_.dirty_count() + ssd_.dirty_count(); }
  size_t MetadataBytes() const override {
    return sizeof(*this) + ram_.MetadataBytes() + ssd_.MetadataBytes();
  }
  size_t ram_size() const override { return ram_.resident(); }
  size_t ssd_size() const override { return ssd_.resident(); }
  bool CheckInvariantsForTest() const override {
    if (!ram_.CheckInvariantsForTest() || !ssd_.CheckInvariantsForTest()) return false;
    std::vector<BlockKey> keys;
    for (auto l : {TierArc::kT1Top, TierArc::kT2Top}) ram_.ListForTest(l, &keys);
    for (const BlockKey& k : keys) {
      if (ssd_.Resident(k)) return false;  // exclusivity
    }
    return true;
  }

 private:
  TierArc ram_;
  TierArc ssd_;
  TierArc::Result r_, r2_;
};

// ---------------------------------------------------------------------------------------------
// UARC (paper 001 §III-A2, Fig. 1c): one ARC of capacity R + S with a single B1/B2, "RAM
// contains the top halves of the T1 and T2 lists, SSD contains the bottom halves".
//   Hit (RAM or SSD): ARC case I, the block moves to the MRU end of T2, which is in RAM; p does
//                    not change ("both first and second level hits are considered alike"). A read
//                    hit on SSD counts one promotion; a write hit on SSD invalidates the SSD copy
//                    (§IV-A) and needs no read.
//   Miss / ghost hit: ARC cases II-IV; the block is allocated at the MRU end of T1 (miss) or T2
//                    (ghost hit), in RAM. Nothing is written to SSD on a miss.
//   RAM overflow:    one block is demoted RAM -> SSD (one SSD write); which list gives it up is
//                    decided by TierArc::BalanceTop (keeps the same fraction of T1 and T2 in RAM).
//   Eviction:        ARC's REPLACE (or case IV-A) drops the LRU block of T1 or T2 — normally on
//                    SSD, in RAM when that list has no SSD part; reported with its dirty bit.
class Uarc final : public TieredCache {
 public:
  explicit Uarc(const TierConfig& c)
      : arc_(c.ram_blocks + c.ssd_blocks, c.ram_blocks, Tier::kRam, Tier::kSsd) {}

  std::string_view name() const override { return "uarc"; }
  TierScheme scheme() const override { return TierScheme::kUnified; }

  void OnAccess(const Access& a, Outcome* out) override {
    out->Reset();
    const bool write = a.op == Op::kWrite;
    arc_.Request(a.key, write, &r_);
    out->hit = r_.found;
    out->admitted = r_.found == Tier::kNone;
    if (r_.found == Tier::kSsd && !write) out->promotions = 1;
    if (r_.demoted) out->ssd_writes = 1;
    if (r_.evicted) Report(r_.victim, out);
  }

  bool MarkClean(const BlockKey& key) override { return arc_.MarkClean(key); }
  bool Erase(const BlockKey& key) override { return arc_.Remove(key, nullptr); }
  Tier Lookup(const BlockKey& key) const override { return arc_.Where(key); }
  bool Holds(const BlockKey& key, Tier tier) const override {
    return tier != Tier::kNone && arc_.Where(key) == tier;
  }
  size_t size() const override { return arc_.resident(); }
  size_t capacity() const override { return arc_.capacity(); }
  size_t dirty_count() const override { return arc_.dirty_count(); }
  size_t MetadataBytes() const override { return sizeof(*this) + arc_.MetadataBytes(); }
  size_t ram_size() const override { return arc_.top_size(); }
  size_t ssd_size() const override { return arc_.bottom_size(); }
  bool CheckInvariantsForTest() const override {
    // One directory, so a key has one node: exclusivity holds by construction; the RAM/SSD
    // bounds are invariant 2 of TierArc plus |SSD| = resident - |RAM| <= S.
    return arc_.CheckInvariantsForTest() &&
           arc_.bottom_size() <= arc_.capacity() - arc_.top_capacity();
  }

 private:
  TierArc arc_;
  TierArc::Result r_;
};

}  // namespace

std::unique_ptr<TieredCache> MakeTieredCache(TierScheme scheme, const TierConfig& config) {
  if (!config.Validate().ok()) return nullptr;
  switch (scheme) {
    case TierScheme::kInclusive:
      return std::make_unique<Iarc>(config);
    case TierScheme::kGlobal:
      return std::make_unique<Garc>(config);
    case TierScheme::kUnified:
      return std::make_unique<Uarc>(config);
  }
  return nullptr;
}

std::unique_ptr<CachePolicy> MakeIarc(const TierConfig& config) {
  return MakeTieredCache(TierScheme::kInclusive, config);
}
std::unique_ptr<CachePolicy> MakeGarc(const TierConfig& config) {
  return MakeTieredCache(TierScheme::kGlobal, config);
}
std::unique_ptr<CachePolicy> MakeUarc(const TierConfig& config) {
  return MakeTieredCache(TierScheme::kUnified, config);
}

}  // namespace ringcache::policy
