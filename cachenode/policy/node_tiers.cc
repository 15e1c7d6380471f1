// NodeTiers: see node_tiers.h. Each rule names the BlockMap function it follows.
#include "cachenode/policy/node_tiers.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringcache::policy {

NodeTiers::NodeTiers(std::unique_ptr<CachePolicy> membership, std::unique_ptr<Placement> placement,
                     std::string placement_name, size_t ssd_slots)
    : membership_(std::move(membership)),
      placement_(std::move(placement)),
      name_(absl::StrCat(std::string(membership_->name()), " placement=", placement_name)),
      exclusive_(placement_->exclusive()),
      ssd_slots_(ssd_slots) {}

void NodeTiers::Forget(Eviction* ev) {
  placement_->OnRemove(ev->key);
  auto it = blocks_.find(ev->key);
  if (it == blocks_.end()) return;
  ev->from = it->second.ram ? Tier::kRam : Tier::kSsd;
  if (it->second.slot) --used_slots_;
  blocks_.erase(it);
}

bool NodeTiers::SlotFree() const { return !exclusive_ || used_slots_ < ssd_slots_; }

void NodeTiers::NoteShadow(const BlockKey& key, const Copies& c) {
  if (!exclusive_ || c.dirty || !c.ram || !c.slot) return;
  shadows_.Push(key, blocks_.size(), [this](const BlockKey& k) { return IsShadow(k); });
}

bool NodeTiers::IsShadow(const BlockKey& key) const {
  auto it = blocks_.find(key);
  return it != blocks_.end() && !it->second.dirty && it->second.ram && it->second.slot;
}

void NodeTiers::Relieve(std::vector<Eviction>* evicted) {
  // BlockMap::RelieveSlotPressure: first the shadow slots of clean blocks in RAM, oldest first,
  // then members the policy sheds, until a slot is free.
  while (!SlotFree()) {
    const std::optional<BlockKey> k =
        shadows_.PopOldest([this](const BlockKey& x) { return IsShadow(x); });
    if (!k) break;
    blocks_[*k].slot = false;
    --used_slots_;
  }
  Outcome shed;
  while (!SlotFree() && membership_->Shed(&shed)) {
    for (Eviction& ev : shed.evicted) {
      Forget(&ev);
      evicted->push_back(ev);
    }
    shed.evicted.clear();
  }
}

void NodeTiers::TakeSlot(Copies* c) {
  c->slot = true;
  ++used_slots_;
}

void NodeTiers::OnAccess(const Access& access, Outcome* out) {
  const BlockKey& key = access.key;
  // CacheNode::AllocateSlots: an exclusive node's write waits for a free slot, shedding members
  // when the slots ran out before the membership did. Every cached write takes a fresh slot.
  std::vector<Eviction> shed;
  if (access.op == Op::kWrite && !SlotFree()) Relieve(&shed);
  membership_->OnAccess(access, out);
  // ApplyEvictions: a member that left the policy leaves both tiers.
  for (Eviction& ev : out->evicted) Forget(&ev);
  out->evicted.insert(out->evicted.end(), shed.begin(), shed.end());
  const bool hit = out->hit != Tier::kNone;
  out->ssd_writes = 0;
  demote_.clear();
  if (access.op == Op::kWrite) {
    if (!hit && !out->admitted) return;  // bypassed or rejected: written home
    // CommitWrite: a fresh slot, and a RAM copy if the placement keeps the block in RAM.
    Copies& c = blocks_[key];
    if (!c.slot) TakeSlot(&c);
    c.dirty = true;
    out->ssd_writes = 1;
    c.ram = placement_->OnAccess(key, false, &demote_) == Tier::kRam;
    Demote(demote_, out);
    return;
  }
  if (hit) {
    // PlanRead: served from RAM if there is a copy; the placement may promote it.
    Copies& c = blocks_[key];
    out->hit = c.ram ? Tier::kRam : Tier::kSsd;
    if (placement_->OnAccess(key, false, &demote_) == Tier::kRam && !c.ram) {
      // FillOrPromote: the slot stays as a shadow copy (exclusive tiers give it up under slot
      // pressure).
      c.ram = true;
      out->promotions = 1;
      NoteShadow(key, c);
    }
    Demote(demote_, out);
    return;
  }
  if (!out->admitted) return;
  // FillOrPromote / PlaceFilled: into RAM with no slot, or into a fresh slot.
  Copies& c = blocks_[key];
  if (placement_->OnAccess(key, true, &demote_) == Tier::kRam) {
    c.ram = true;
  } else if (SlotFree()) {
    TakeSlot(&c);
    out->ssd_writes += 1;
  } else {
    // No slot, and a fill never waits for one: the block is not cached after all.
    blocks_.erase(key);
    placement_->OnRemove(key);
    membership_->Erase(key);
    out->admitted = false;
  }
  Demote(demote_, out);
}

void NodeTiers::Demote(const std::vector<BlockKey>& demote, Outcome* out) {
  // PushDemotions / Destager::Demote: a block with a slot only drops its RAM copy; one without
  // is written to a fresh slot.
  for (const BlockKey& d : demote) {
    auto it = blocks_.find(d);
    if (it == blocks_.end() || !it->second.ram) continue;
    if (!it->second.slot && !placement_->WorthSsd(d)) {
      // SE-UARC's sieve: the clean RAM-only block leaves the cache (BlockMap::PushDemotions).
      DropRamOnly(it, out);
      continue;
    }
    if (!it->second.slot && !SlotFree()) {
      // Destager::Demote: no free slot on an exclusive node: shed, and if that freed none the
      // clean block leaves the cache (BlockMap::DropUndemoted).
      Relieve(&out->evicted);
      it = blocks_.find(d);
      if (it == blocks_.end() || !it->second.ram) continue;
      if (!SlotFree()) {
        DropRamOnly(it, out);
        continue;
      }
    }
    it->second.ram = false;
    if (!it->second.slot) {
      TakeSlot(&it->second);
      out->ssd_writes += 1;
    }
  }
}

void NodeTiers::DropRamOnly(absl::flat_hash_map<BlockKey, Copies>::iterator it, Outcome* out) {
  const BlockKey d = it->first;
  blocks_.erase(it);
  placement_->OnRemove(d);
  membership_->Erase(d);
  out->evicted.push_back(Eviction{d, false, Tier::kRam});
}

bool NodeTiers::MarkClean(const BlockKey& key) {
  auto it = blocks_.find(key);
  if (it != blocks_.end()) {
    it->second.dirty = false;
    NoteShadow(key, it->second);  // BlockMap::NoteDestagedShadows
  }
  return membership_->MarkClean(key);
}

bool NodeTiers::Erase(const BlockKey& key) {
  placement_->OnRemove(key);
  if (auto it = blocks_.find(key); it != blocks_.end()) {
    if (it->second.slot) --used_slots_;
    blocks_.erase(it);
  }
  return membership_->Erase(key);
}

Tier NodeTiers::Lookup(const BlockKey& key) const {
  auto it = blocks_.find(key);
  if (it == blocks_.end()) return membership_->Lookup(key);
  return it->second.ram ? Tier::kRam : Tier::kSsd;
}

size_t NodeTiers::MetadataBytes() const {
  return sizeof(*this) + membership_->MetadataBytes() +
         blocks_.capacity() * (sizeof(BlockKey) + sizeof(Copies) + 1);
}

}  // namespace ringcache::policy
