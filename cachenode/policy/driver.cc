// CacheDriver: see driver.h.
#include "cachenode/policy/driver.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringcache::policy {

absl::Status DriverConfig::Validate() const {
  if (capacity_blocks < 1) return absl::InvalidArgumentError("cache capacity must be >= 1 block");
  if (capacity_blocks >= kNoSlot) {
    return absl::InvalidArgumentError("cache capacity must be < 2^32 - 1 blocks");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CacheDriver>> CacheDriver::Create(const DriverConfig& config,
                                                                 DriverParts parts) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  if (!parts.make_space) return absl::InvalidArgumentError("driver: no space factory");
  return std::unique_ptr<CacheDriver>(new CacheDriver(config, std::move(parts)));
}

CacheDriver::CacheDriver(const DriverConfig& config, DriverParts parts)
    : name_(config.name),
      slots_(config.capacity_blocks),
      space_(parts.make_space(&slots_)),
      admission_(std::move(parts.admission)),
      bypasses_(std::move(parts.bypasses)),
      victim_(std::move(parts.victim)),
      capacity_(config.capacity_blocks) {
  if (!admission_) admission_ = std::make_unique<AlwaysAdmit>();
  if (!victim_) victim_ = std::make_unique<TailVictim>();
  SizeCandidates(*admission_, *victim_);
}

void CacheDriver::SizeCandidates(const Admission& a, const VictimChooser& v) {
  const size_t window =
      std::min(std::max<size_t>({size_t{1}, v.window(), a.replacement_window()}), capacity_);
  if (window > candidates_.size()) candidates_.resize(window);
}

CacheDriver::Rules CacheDriver::RulesOf(uint32_t vdi) {
  if (!vdi_rules_.empty()) {
    if (auto it = vdi_rules_.find(vdi); it != vdi_rules_.end()) {
      VdiRules& r = *it->second;
      return Rules{r.admission.get(), &r.bypasses, r.victim.get()};
    }
  }
  return Rules{admission_.get(), &bypasses_, victim_.get()};
}

absl::Status CacheDriver::SetVdiRules(uint32_t vdi, std::unique_ptr<VdiRules> rules) {
  if (rules == nullptr) {
    if (!vdi_rules_.contains(vdi)) return absl::OkStatus();
    if (absl::Status s = space_->ReplaceOrder(vdi, nullptr); !s.ok()) return s;
    vdi_rules_.erase(vdi);
    return absl::OkStatus();
  }
  if (!rules->admission) rules->admission = std::make_unique<AlwaysAdmit>();
  if (!rules->victim) rules->victim = std::make_unique<TailVictim>();
  if (rules->admission->replacement_window() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", std::string(rules->admission->name()),
                     "' judges replacements and cannot run per VDI inside the node's queues"));
  }
  if (absl::Status s = space_->ReplaceOrder(vdi, &rules->order); !s.ok()) return s;
  SizeCandidates(*rules->admission, *rules->victim);
  vdi_rules_[vdi] = std::move(rules);
  return absl::OkStatus();
}

std::string_view CacheDriver::VdiSpec(uint32_t vdi) const {
  auto it = vdi_rules_.find(vdi);
  return it == vdi_rules_.end() ? std::string_view() : std::string_view(it->second->spec);
}

void CacheDriver::OnAccess(const Access& access, Outcome* out) {
  out->Reset();
  const BlockKey& key = access.key;
  const uint32_t q = space_->OnAccess(key.vdi);
  const SlotId slot = slots_.Find(key);
  const bool hit = slot != kNoSlot;
  const Rules rules = RulesOf(key.vdi);
  Admission& admission = *rules.admission;
  admission.OnAccess(access, hit);
  bool bypass = false;
  for (const auto& b : *rules.bypasses) bypass |= b->Check(access, hit);

  if (hit) {
    out->hit = Tier::kSsd;
    space_->queue(q).Touch(slot);
    if (access.op == Op::kWrite) {
      if (!slots_.dirty(slot)) {
        slots_.set_dirty(slot, true);
        ++dirty_;
      }
      out->ssd_writes = 1;
    }
    return;
  }
  const bool reused = space_->OnMiss(q, key);
  if (bypass) {
    out->bypassed = true;
    return;
  }
  const bool write = access.op == Op::kWrite;
  const bool judged = !write || admission.judges_writes();
  if (judged && !(reused && admission.replacement_window() == 0) && !admission.Admit(access)) {
    out->rejected = true;
    return;
  }
  Order& order = space_->queue(q);
  order.OnMiss(key);
  // A VDI at its maximum share makes room in its own queue (SetShare).
  if (space_->AtMaxShare(q) && EvictOne(q, key, judged, out) != EvictResult::kEvicted) {
    out->rejected = true;
    return;
  }
  if (space_->NeedsReclaim(slots_.used()) && !MakeRoom(key, judged, out)) {
    out->rejected = true;
    return;
  }
  const SlotId s = slots_.Allocate(key, write);
  order.Insert(s);
  if (write) ++dirty_;
  out->admitted = true;
  out->ssd_writes = 1;
}

void CacheDriver::Adopt(const Access& access, bool dirty, Outcome* out) {
  out->Reset();
  const BlockKey& key = access.key;
  const uint32_t q = space_->OnAccess(key.vdi);
  if (slots_.Find(key) != kNoSlot) {
    out->hit = Tier::kSsd;
    return;
  }
  Order& order = space_->queue(q);
  order.OnMiss(key);
  if (space_->AtMaxShare(q) && EvictOne(q, key, /*judged=*/false, out) != EvictResult::kEvicted) {
    out->rejected = true;
    return;
  }
  if (space_->NeedsReclaim(slots_.used()) && !MakeRoom(key, /*judged=*/false, out)) {
    out->rejected = true;
    return;
  }
  order.Insert(slots_.Allocate(key, dirty));
  if (dirty) ++dirty_;
  out->admitted = true;
}

bool CacheDriver::TakeMembers(std::vector<BlockKey>* out) {
  out->reserve(out->size() + slots_.used());
  for (uint32_t q = 0; q < static_cast<uint32_t>(space_->queue_count()); ++q) {
    Order& order = space_->queue(q);
    SlotId s;
    while (order.Candidates(absl::MakeSpan(&s, 1)) == 1) {
      out->push_back(slots_.key(s));
      order.Remove(s, /*evicted=*/false);
      if (slots_.dirty(s)) --dirty_;
      slots_.Free(s);
    }
  }
  return true;
}

bool CacheDriver::MakeRoom(const BlockKey& incoming, bool judged, Outcome* out) {
  space_->BeginReclaim(slots_.used());
  for (uint32_t q; (q = space_->NextReclaimQueue(slots_.used())) != kNoQueue;) {
    const EvictResult r = EvictOne(q, incoming, judged, out);
    if (r == EvictResult::kRefused) return false;
    if (r == EvictResult::kEmpty) break;  // defensive: a space named an empty queue
  }
  // The round may leave the cache full (e.g. xi = 1 and every queue within its bounds).
  while (slots_.full()) {
    const uint32_t q = space_->FallbackQueue();
    if (q == kNoQueue) return false;
    const EvictResult r = EvictOne(q, incoming, judged, out);
    if (r == EvictResult::kRefused) return false;
    if (r == EvictResult::kEmpty) return false;
  }
  return true;
}

CacheDriver::EvictResult CacheDriver::EvictOne(uint32_t q, const BlockKey& incoming, bool judged,
                                               Outcome* out) {
  Order& order = space_->queue(q);
  // The evicting queue's VDI decides (a per-VDI admission never judges replacements).
  const Rules rules = RulesOf(space_->QueueVdi(q));  // kNoVdi: the driver's own
  VictimChooser& victim_chooser = *rules.victim;
  const bool judge = judged && rules.admission->replacement_window() > 0;
  size_t want = judge ? rules.admission->replacement_window() : victim_chooser.window();
  want = std::min(want, candidates_.size());
  // A wide window is listed in two steps: a short prefix often decides already (LCR: a clean
  // block near the tail), which saves walking the whole window on every eviction.
  constexpr size_t kPrefix = 8;
  size_t n;
  if (!judge && want > kPrefix) {
    n = order.Candidates(absl::MakeSpan(candidates_.data(), kPrefix));
    if (n == kPrefix &&
        !victim_chooser.DecidedBy(absl::MakeConstSpan(candidates_.data(), n), slots_)) {
      n = order.Candidates(absl::MakeSpan(candidates_.data(), want));
    }
  } else {
    n = order.Candidates(absl::MakeSpan(candidates_.data(), want));
  }
  if (n == 0) return EvictResult::kEmpty;
  const absl::Span<const SlotId> cands(candidates_.data(), n);
  size_t pick;
  if (judge) {
    const int i = rules.admission->ChooseReplacement(incoming, cands, slots_);
    if (i < 0) return EvictResult::kRefused;
    pick = static_cast<size_t>(i);
  } else {
    pick = victim_chooser.Choose(cands, slots_);
  }
  const SlotId victim = cands[pick];
  const bool dirty = slots_.dirty(victim);
  out->evicted.push_back(Eviction{slots_.key(victim), dirty, Tier::kSsd});
  space_->OnEvicted(q, slots_.key(victim));
  rules.admission->OnEvicted(slots_.key(victim));
  order.Remove(victim, /*evicted=*/true);
  slots_.Free(victim);
  if (dirty) --dirty_;
  return EvictResult::kEvicted;
}

bool CacheDriver::MarkClean(const BlockKey& key) {
  const SlotId s = slots_.Find(key);
  if (s == kNoSlot) return false;
  if (slots_.dirty(s)) {
    slots_.set_dirty(s, false);
    --dirty_;
  }
  return true;
}

bool CacheDriver::Shed(Outcome* out) {
  const uint32_t q = space_->ShedQueue();
  return q != kNoQueue && EvictOne(q, BlockKey{}, /*judged=*/false, out) == EvictResult::kEvicted;
}

bool CacheDriver::Erase(const BlockKey& key) {
  const SlotId s = slots_.Find(key);
  if (s == kNoSlot) return false;
  const uint32_t q = space_->QueueOf(key.vdi);
  space_->queue(q).Remove(s, /*evicted=*/false);
  if (slots_.dirty(s)) --dirty_;
  slots_.Free(s);
  return true;
}

Tier CacheDriver::Lookup(const BlockKey& key) const {
  return slots_.Find(key) == kNoSlot ? Tier::kNone : Tier::kSsd;
}

size_t CacheDriver::MetadataBytes() const {
  size_t bytes = sizeof(*this) + slots_.MetadataBytes() + space_->MetadataBytes() +
                 admission_->MetadataBytes() + candidates_.capacity() * sizeof(SlotId);
  for (const auto& b : bypasses_) bytes += b->MetadataBytes();
  for (const auto& [vdi, r] : vdi_rules_) {
    bytes += sizeof(VdiRules) + r->spec.capacity() + r->admission->MetadataBytes();
    for (const auto& b : r->bypasses) bytes += b->MetadataBytes();
  }
  return bytes;
}

void CacheDriver::AppendVdiStats(std::vector<VdiStats>* out) const {
  const size_t first = out->size();
  space_->AppendVdiStats(out);
  const absl::Span<VdiStats> rows = absl::MakeSpan(*out).subspan(first);
  admission_->AnnotateVdiStats(rows);
  if (vdi_rules_.empty()) return;
  // A VDI with its own admission reports that one's state, not the node's (which may still
  // hold some of the VDI's from before it had its own).
  for (VdiStats& row : rows) {
    auto it = vdi_rules_.find(row.vdi);
    if (it == vdi_rules_.end()) continue;
    row.admit_first = row.admit_bar = row.region_margin = row.budget_margin = -1;
    it->second->admission->AnnotateVdiStats(absl::MakeSpan(&row, 1));
  }
}

}  // namespace ringcache::policy
