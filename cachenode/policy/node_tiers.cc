// NodeTiers: see node_tiers.h. Each rule names the BlockMap function it follows.
#include "cachenode/policy/node_tiers.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ringcache::policy {

NodeTiers::NodeTiers(std::unique_ptr<CachePolicy> membership, std::unique_ptr<Placement> placement,
                     std::string placement_name)
    : membership_(std::move(membership)),
      placement_(std::move(placement)),
      name_(absl::StrCat(std::string(membership_->name()), " placement=", placement_name)) {}

void NodeTiers::OnAccess(const Access& access, Outcome* out) {
  const BlockKey& key = access.key;
  membership_->OnAccess(access, out);
  // ApplyEvictions: a member that left the policy leaves both tiers.
  for (Eviction& ev : out->evicted) {
    placement_->OnRemove(ev.key);
    auto it = blocks_.find(ev.key);
    if (it != blocks_.end()) {
      ev.from = it->second.ram ? Tier::kRam : Tier::kSsd;
      blocks_.erase(it);
    }
  }
  const bool hit = out->hit != Tier::kNone;
  out->ssd_writes = 0;
  demote_.clear();
  if (access.op == Op::kWrite) {
    if (!hit && !out->admitted) return;  // bypassed or rejected: written home
    // CommitWrite: a fresh slot, and a RAM copy if the placement keeps the block in RAM.
    Copies& c = blocks_[key];
    c.slot = true;
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
      c.ram = true;  // FillOrPromote: the slot stays as a shadow copy
      out->promotions = 1;
    }
    Demote(demote_, out);
    return;
  }
  if (!out->admitted) return;
  // FillOrPromote / PlaceFilled: into RAM with no slot, or into a fresh slot.
  Copies& c = blocks_[key];
  if (placement_->OnAccess(key, true, &demote_) == Tier::kRam) {
    c.ram = true;
  } else {
    c.slot = true;
    out->ssd_writes += 1;
  }
  Demote(demote_, out);
}

void NodeTiers::Demote(const std::vector<BlockKey>& demote, Outcome* out) {
  // PushDemotions / BeginDemote: a block with a slot only drops its RAM copy; one without is
  // written to a fresh slot.
  for (const BlockKey& d : demote) {
    auto it = blocks_.find(d);
    if (it == blocks_.end() || !it->second.ram) continue;
    if (!it->second.slot && !placement_->WorthSsd(d)) {
      // SE-UARC's sieve: the clean RAM-only block leaves the cache (BlockMap::PushDemotions).
      blocks_.erase(it);
      placement_->OnRemove(d);
      membership_->Erase(d);
      out->evicted.push_back(Eviction{d, false, Tier::kRam});
      continue;
    }
    it->second.ram = false;
    if (!it->second.slot) {
      it->second.slot = true;
      out->ssd_writes += 1;
    }
  }
}

bool NodeTiers::Erase(const BlockKey& key) {
  placement_->OnRemove(key);
  blocks_.erase(key);
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
