#include "cachenode/block_map.h"

#include <algorithm>
#include <utility>

#include "cachenode/destage_planner.h"

namespace ringcache::cachenode {

namespace {

// A block the policy could not take in (CachePolicy::Adopt found no room: a share's maximum, or
// every queue empty yet full) leaves the cache as an eviction does, instead of staying in the
// map without the policy knowing it.
void LeaveIfRefused(const BlockKey& key, bool dirty, policy::Outcome* out) {
  if (out->admitted || out->hit != policy::Tier::kNone) return;
  out->evicted.push_back(policy::Eviction{key, dirty, policy::Tier::kSsd});
}

}  // namespace

BlockMap::BlockMap(std::unique_ptr<policy::CachePolicy> policy,
                   std::unique_ptr<policy::Placement> placement, uint32_t block_size,
                   VdiTable* vdis, Clock* clock, metrics::Counter* evictions,
                   metrics::Counter* shed)
    : block_size_(block_size),
      vdis_(vdis),
      clock_(clock),
      evictions_(evictions),
      shed_counter_(shed),
      exclusive_(placement->exclusive()),
      policy_(std::move(policy)),
      placement_(std::move(placement)) {}

policy::Access BlockMap::NextAccess(const BlockKey& key, policy::Op op) {
  const auto now = static_cast<uint64_t>(clock_->NowMicros());
  if (budget_ != nullptr) {
    // What the SSD wrote since the last access (fills, writes, demotions, repairs), charged
    // before the policy asks the budget about this one.
    const uint64_t written = budget_written_();
    budget_->Spend(written - budget_charged_, now);
    budget_charged_ = written;
  }
  return {key, op, now, seq_++};
}

std::optional<policy::WriteBudget::Snapshot> BlockMap::BudgetSnapshot() const {
  absl::MutexLock l(&mu_);
  if (budget_ == nullptr) return std::nullopt;
  return budget_->snapshot();
}

void BlockMap::CountDirty(uint32_t vdi, int delta) {
  if (auto c = vdis_->Counters(vdi)) c->dirty_blocks += delta;
}

void BlockMap::MarkDirty(const BlockKey& key, BlockEntry* e) {
  const bool was = e->dirty;
  e->dirty = true;
  if (dirty_set_.insert(key).second) {
    dirty_order_[key.vdi].push_back(key);
    dirty_count_.fetch_add(1, std::memory_order_relaxed);
  }
  if (!was) {
    CountDirty(key.vdi, +1);
    e->dirty_since_us = clock_->NowMicros();
    ++dirty_since_[key.vdi][e->dirty_since_us];
  }
}

void BlockMap::MarkClean(const BlockKey& key, BlockEntry* e) {
  if (!e->dirty) return;
  e->dirty = false;
  if (auto v = dirty_since_.find(key.vdi); v != dirty_since_.end()) {
    if (auto t = v->second.find(e->dirty_since_us); t != v->second.end() && --t->second == 0) {
      v->second.erase(t);
      if (v->second.empty()) dirty_since_.erase(v);
    }
  }
  // Its log record (if any) is retired by the caller, once whatever replaced the block is
  // durable (at its homes, or in a newer record).
  e->log_seq = 0;
  e->log_nodes.clear();
  if (dirty_set_.erase(key) != 0) dirty_count_.fetch_sub(1, std::memory_order_relaxed);
  CountDirty(key.vdi, -1);
}

void BlockMap::ApplyEvictions(const policy::Outcome& out) {
  for (const policy::Eviction& ev : out.evicted) {
    placement_->OnRemove(ev.key);
    auto it = map_.find(ev.key);
    if (it == map_.end()) continue;  // admitted but not filled yet: the filler will notice
    it->second.state = BlockState::kEvicting;
    work_.push_back({ev.key, false});
    evictions_->Increment();
    if (auto c = vdis_->Counters(ev.key.vdi)) c->evictions++;
  }
}

void BlockMap::PushDemotions(const std::vector<BlockKey>& demote) {
  for (const BlockKey& d : demote) {
    // A block with a slot (dirty, or a shadow copy kept at promotion) leaves RAM at once: there
    // is nothing to write, so no work for the reclaimer.
    auto it = map_.find(d);
    if (it != map_.end() && it->second.slot >= 0) {
      it->second.ram.reset();
      continue;
    }
    if (it != map_.end() && !it->second.dirty && it->second.log_seq == 0 &&
        it->second.state == BlockState::kCached && !placement_->WorthSsd(d)) {
      // SE-UARC's sieve (placement.h): a clean RAM-only block that was not read often enough
      // leaves the cache instead of taking an SSD slot. It holds no slot and no log record.
      Leftovers none;
      ForgetLocked(d, &none);
      evictions_->Increment();
      if (auto c = vdis_->Counters(d.vdi)) c->evictions++;
      continue;
    }
    work_.push_back({d, true});
  }
}

void BlockMap::NoteShadow(const BlockKey& key, const BlockEntry& e) {
  if (!exclusive_ || e.dirty || !e.ram || e.slot < 0 || e.state != BlockState::kCached) return;
  shadows_.Push(key, map_.size(),
                [this](const BlockKey& k) ABSL_NO_THREAD_SAFETY_ANALYSIS { return IsShadow(k); });
}

bool BlockMap::IsShadow(const BlockKey& key) const {
  auto it = map_.find(key);
  if (it == map_.end()) return false;
  const BlockEntry& e = it->second;
  return !e.dirty && e.ram && e.slot >= 0 && e.state == BlockState::kCached;
}

uint32_t BlockMap::RelieveSlotPressure(uint32_t free, uint32_t need, Leftovers* out) {
  const uint64_t target = uint64_t{need} + slot_headroom_.load(std::memory_order_relaxed);
  if (!exclusive_ || free >= target) return 0;
  absl::MutexLock l(&mu_);
  uint64_t have = free;  // plus the slots the reclaimer will free: evicted blocks that hold one
  for (const ReclaimWork& w : work_) {
    if (w.demote) continue;
    auto it = map_.find(w.key);
    have += it != map_.end() && it->second.state == BlockState::kEvicting && it->second.slot >= 0;
  }
  uint32_t got = 0;
  // First the shadow copies of clean blocks in RAM, oldest first: nothing leaves the cache.
  while (have < target) {
    const std::optional<BlockKey> k = shadows_.PopOldest(
        [this](const BlockKey& x) ABSL_NO_THREAD_SAFETY_ANALYSIS { return IsShadow(x); });
    if (!k) break;
    BlockEntry& e = map_.at(*k);
    out->slots.push_back(static_cast<uint32_t>(e.slot));
    e.slot = -1;
    ++have;
    ++got;
  }
  // Then members, as the policy picks its victims.
  policy::Outcome shed;
  while (have < target) {
    shed.evicted.clear();
    if (!policy_->Shed(&shed)) break;
    for (const policy::Eviction& ev : shed.evicted) {
      auto it = map_.find(ev.key);
      if (it != map_.end() && it->second.slot >= 0) ++have, ++got;
    }
    ApplyEvictions(shed);
    shed_ += shed.evicted.size();
    if (shed_counter_ != nullptr)
      shed_counter_->Increment(static_cast<double>(shed.evicted.size()));
  }
  return got;
}

void BlockMap::RemoveLocked(const BlockKey& key, Leftovers* out) {
  auto it = map_.find(key);
  if (it == map_.end()) return;
  BlockEntry& e = it->second;
  // REQUIRES (callers): whatever replaced the block is durable at home or in a newer record.
  if (e.log_seq != 0) out->log_seqs.push_back(e.log_seq);
  MarkClean(key, &e);
  if (e.slot >= 0) out->slots.push_back(static_cast<uint32_t>(e.slot));
  map_.erase(it);
}

void BlockMap::ForgetLocked(const BlockKey& key, Leftovers* out) {
  policy_->Erase(key);
  placement_->OnRemove(key);
  RemoveLocked(key, out);
}

void BlockMap::AdoptRecovered(const RecoveredSlot& r, Leftovers* out) {
  absl::MutexLock l(&mu_);
  if (auto it = map_.find(r.key); it != map_.end()) {
    // A damaged newer version rewritten from its log record replaces the older good one.
    BlockEntry& e = it->second;
    if (e.slot >= 0) out->slots.push_back(static_cast<uint32_t>(e.slot));
    e.slot = r.slot;
    e.log_seq = r.log_seq;
    e.epoch = r.epoch;
    MarkDirty(r.key, &e);
    return;
  }
  // Every recovered block re-enters the policy as a block it holds (CachePolicy::Adopt: never
  // judged by admission or bypasses), dirty or clean. Recovered blocks stay on SSD.
  policy::Outcome outcome;
  const policy::Access a{r.key, policy::Op::kWrite, 0, seq_++};
  policy_->Adopt(a, r.dirty, &outcome);
  LeaveIfRefused(r.key, r.dirty, &outcome);
  BlockEntry& e = map_[r.key];
  e.slot = r.slot;
  e.log_seq = r.log_seq;
  e.epoch = r.epoch;
  if (r.dirty) MarkDirty(r.key, &e);
  ApplyEvictions(outcome);
}

BlockMap::Rebuilt BlockMap::ReplacePolicy(std::unique_ptr<policy::CachePolicy> fresh) {
  absl::MutexLock l(&mu_);
  std::vector<BlockKey> order;
  if (!policy_->TakeMembers(&order)) {
    for (const auto& [key, e] : map_) {
      if (e.state == BlockState::kCached) order.push_back(key);
    }
  }
  policy::Outcome out;
  policy_ = std::move(fresh);
  Rebuilt r;
  for (const BlockKey& key : order) {
    auto it = map_.find(key);
    const bool dirty = it != map_.end() && it->second.dirty;
    policy_->Adopt(NextAccess(key, policy::Op::kWrite), dirty, &out);
    LeaveIfRefused(key, dirty, &out);
    ++r.members;
    r.evicted += out.evicted.size();
    ApplyEvictions(out);
  }
  return r;
}

uint64_t BlockMap::EvictSlotsFrom(uint32_t first) {
  absl::MutexLock l(&mu_);
  policy::Outcome out;
  for (const auto& [key, e] : map_) {
    if (e.state != BlockState::kCached || e.slot < 0 || static_cast<uint64_t>(e.slot) < first) {
      continue;
    }
    policy_->Erase(key);
    out.evicted.push_back(policy::Eviction{key, e.dirty, policy::Tier::kSsd});
  }
  ApplyEvictions(out);
  return out.evicted.size();
}

uint64_t BlockMap::ResizeRam(size_t blocks) {
  absl::MutexLock l(&mu_);
  std::vector<BlockKey> demote;
  placement_->SetRamCapacity(blocks, &demote);
  PushDemotions(demote);
  return demote.size();
}

size_t BlockMap::ram_capacity() const {
  absl::MutexLock l(&mu_);
  return placement_->ram_capacity();
}

size_t BlockMap::ram_held() const {
  absl::MutexLock l(&mu_);
  size_t n = placement_->ram_blocks();
  for (const ReclaimWork& w : work_) n += w.demote;
  return n;
}

// ---------------------------------------------------------------------------------------------
// Reads

bool BlockMap::AllStored(const VdiInfo& v, uint64_t object, uint32_t first, uint32_t count) const {
  absl::MutexLock l(&mu_);
  for (uint32_t i = 0; i < count; ++i) {
    auto it = map_.find(v.KeyOf(object, first + i));
    if (it == map_.end() || (it->second.ram == nullptr && it->second.slot < 0)) return false;
  }
  return true;
}

void BlockMap::PlanRead(const VdiInfo& v, uint64_t object, uint32_t first, uint32_t count,
                        std::vector<ReadPlan>* plan) {
  plan->assign(count, ReadPlan{});
  VdiCounters& ctr = *v.counters;
  const bool passthrough = v.mode == CacheMode::kPassThrough;
  const bool stream = stream_read_blocks_ != 0 && count >= stream_read_blocks_;
  absl::MutexLock l(&mu_);
  policy::Outcome out;
  for (uint32_t i = 0; i < count; ++i) {
    const BlockKey key = v.KeyOf(object, first + i);
    auto it = map_.find(key);
    ReadPlan& p = (*plan)[i];
    if (it != map_.end()) {
      p.ram = it->second.ram;
      p.slot = it->second.slot;
      p.dirty = it->second.dirty;
    }
    if (passthrough) {
      // No policy access; still serve a cached copy (it may be the only current one).
      p.miss = it == map_.end();
      ctr.bypassed++;
      continue;
    }
    policy_->OnAccess(NextAccess(key, policy::Op::kRead), &out);
    if (out.bypassed) ctr.bypassed++;
    if (out.rejected) ctr.admissions_rejected++;
    // Whether the block is a member after the access: a hit stays one, a miss if admitted
    // (the same answer as policy_->Lookup, without a second index look-up per block).
    const bool member = out.hit != policy::Tier::kNone || out.admitted;
    if (it != map_.end()) {
      BlockEntry& e = it->second;
      if (e.state == BlockState::kEvicting && member) e.state = BlockState::kCached;  // re-admitted
      (p.ram ? ctr.hits_ram : ctr.hits_ssd)++;
      // A stream's hits do not reorder the tiers (docs/cache-node.md, "Tiers").
      if (e.state == BlockState::kCached && !stream) {
        std::vector<BlockKey> demote;
        const policy::Tier t = placement_->OnAccess(key, false, &demote);
        PushDemotions(demote);
        p.promote = t == policy::Tier::kRam && !p.ram;
      }
    } else {
      ctr.misses++;
      p.miss = true;
      p.admit = member;
    }
    ApplyEvictions(out);
  }
}

bool BlockMap::FillOrPromote(const BlockKey& key, bool promote,
                             std::shared_ptr<const std::string> copy) {
  absl::MutexLock l(&mu_);
  if (policy_->Lookup(key) == policy::Tier::kNone) return false;  // evicted meanwhile
  auto it = map_.find(key);
  if (promote) {
    if (it == map_.end()) return false;
    BlockEntry& e = it->second;
    if (placement_->TierOf(key) != policy::Tier::kRam) return false;
    // The SSD slot stays (a shadow copy): demoting the block later only drops the RAM copy,
    // instead of writing it back to a fresh slot (docs/cache-node.md, "Tiers"). Exclusive tiers
    // give it back under slot pressure.
    e.ram = std::move(copy);
    NoteShadow(key, e);
    return false;
  }
  if (it != map_.end()) return false;  // someone else filled it
  std::vector<BlockKey> demote;
  const policy::Tier t = placement_->OnAccess(key, true, &demote);
  PushDemotions(demote);
  BlockEntry& e = map_[key];
  if (t == policy::Tier::kRam) {
    e.ram = std::move(copy);
    return false;
  }
  return true;
}

bool BlockMap::PlaceFilled(const BlockKey& key, std::optional<uint32_t> slot) {
  absl::MutexLock l(&mu_);
  auto it = map_.find(key);
  const bool empty = it != map_.end() && it->second.slot < 0 && !it->second.ram;
  if (slot && empty) {
    it->second.slot = *slot;
    return true;
  }
  if (empty) {
    // Could not store it: leave the cache consistent by forgetting the block.
    policy_->Erase(key);
    placement_->OnRemove(key);
    map_.erase(it);
  }
  return false;
}

void BlockMap::MarkDirty(const VdiInfo& v, uint64_t object, uint32_t first,
                         std::vector<bool>* allocated) {
  absl::MutexLock l(&mu_);
  for (uint32_t i = 0; i < allocated->size(); ++i) {
    auto it = map_.find(v.KeyOf(object, first + i));
    if (it != map_.end() && it->second.dirty) (*allocated)[i] = true;
  }
}

// ---------------------------------------------------------------------------------------------
// Writes

bool BlockMap::AccessForWrite(const VdiInfo& v, uint64_t object, uint32_t first, uint32_t count) {
  bool bypass = false, refused = false, member = false;
  absl::MutexLock l(&mu_);
  policy::Outcome out;
  for (uint32_t i = 0; i < count; ++i) {
    policy_->OnAccess(NextAccess(v.KeyOf(object, first + i), policy::Op::kWrite), &out);
    bypass |= out.bypassed;
    refused |= out.rejected;
    member |= out.hit != policy::Tier::kNone || out.admitted;
    if (out.rejected) v.counters->admissions_rejected++;
    ApplyEvictions(out);
  }
  // A refused write miss (an admission that judges writes) goes around as a bypassed one does,
  // unless the same request writes a block the cache holds or admits: going around would drop
  // that block's cached copy (WriteAround invalidates what it writes). Then the whole run is
  // cached, and a refused block, not a member of the policy, is destaged and dropped
  // (CommitWrite).
  return bypass || (refused && !member);
}

void BlockMap::CommitWrite(const WriteCommit& w, Leftovers* out) {
  absl::MutexLock l(&mu_);
  for (uint32_t i = 0; i < w.count; ++i) {
    const BlockKey key = w.vdi->KeyOf(w.object, w.first + i);
    BlockEntry& e = map_[key];
    if (e.slot >= 0) out->slots.push_back(static_cast<uint32_t>(e.slot));
    if (e.log_seq != 0) out->log_seqs.push_back(e.log_seq);  // superseded (or home: through)
    if (w.through) {
      MarkClean(key, &e);
      e.epoch = 0;
    } else {
      MarkDirty(key, &e);
      e.log_seq = w.log_seq + i;
      e.epoch = w.epoch;
      e.log_nodes.assign(w.landed->begin(), w.landed->end());
    }
    e.slot = w.slots[i];
    e.ram.reset();
    if (policy_->Lookup(key) == policy::Tier::kNone) {
      // Evicted again while we wrote (another object's access): keep the durable copy until
      // the reclaimer has destaged it.
      e.state = BlockState::kEvicting;
      work_.push_back({key, false});
      continue;
    }
    e.state = BlockState::kCached;
    if (w.through) policy_->MarkClean(key);
    std::vector<BlockKey> demote;
    if (placement_->OnAccess(key, false, &demote) == policy::Tier::kRam) {
      // In RAM too; the slot stays as its shadow copy (free demotion).
      e.ram = std::make_shared<const std::string>(w.data + uint64_t{i} * block_size_, block_size_);
      NoteShadow(key, e);
    }
    PushDemotions(demote);
  }
}

void BlockMap::Invalidate(const BlockKey& key, Leftovers* out) {
  absl::MutexLock l(&mu_);
  ForgetLocked(key, out);
}

// ---------------------------------------------------------------------------------------------
// Dirty blocks

std::optional<DirtyCopy> BlockMap::DirtyBlock(const BlockKey& key) const {
  absl::MutexLock l(&mu_);
  auto it = map_.find(key);
  if (it == map_.end() || !it->second.dirty) return std::nullopt;
  const BlockEntry& e = it->second;
  return DirtyCopy{e.ram, e.slot, e.log_seq, e.epoch};
}

std::optional<DestageRun> BlockMap::PlanDestage(const BlockKey& key, uint64_t blocks_per_object,
                                                uint32_t max_blocks) const {
  const uint64_t base = key.block / blocks_per_object * blocks_per_object;
  absl::MutexLock l(&mu_);
  auto dirty = [&](uint64_t b) {
    auto it = map_.find(BlockKey{key.vdi, b});
    return it != map_.end() && it->second.dirty;
  };
  if (!dirty(key.block)) return std::nullopt;
  // Coalesce adjacent dirty blocks of the same object (docs/design.md §4).
  DestageRun run;
  uint64_t lo = key.block;
  while (lo > base && dirty(lo - 1) && key.block - lo + 1 < max_blocks) --lo;
  run.first_block = lo;
  for (uint64_t b = lo; b < base + blocks_per_object && dirty(b) && run.blocks.size() < max_blocks;
       ++b) {
    const BlockEntry& e = map_.at(BlockKey{key.vdi, b});
    run.blocks.push_back({e.ram, e.slot, e.log_seq, e.epoch});
  }
  return run;
}

void BlockMap::MarkDestaged(uint32_t vdi, uint64_t first_block, size_t n,
                            std::vector<uint32_t>* clean_slots, Leftovers* out) {
  absl::MutexLock l(&mu_);
  for (size_t i = 0; i < n; ++i) {
    const BlockKey k{vdi, first_block + i};
    auto it = map_.find(k);
    if (it == map_.end() || !it->second.dirty) continue;
    // At all N homes now: its log record is no longer needed.
    if (it->second.log_seq != 0) out->log_seqs.push_back(it->second.log_seq);
    MarkClean(k, &it->second);
    policy_->MarkClean(k);
    if (it->second.slot >= 0) clean_slots->push_back(static_cast<uint32_t>(it->second.slot));
  }
}

void BlockMap::NoteDestagedShadows(uint32_t vdi, uint64_t first_block, size_t n) {
  if (!exclusive_) return;
  absl::MutexLock l(&mu_);
  for (size_t i = 0; i < n; ++i) {
    const BlockKey k{vdi, first_block + i};
    if (IsShadow(k)) NoteShadow(k, map_.at(k));
  }
}

void BlockMap::DiscardObsolete(const BlockKey& key, Leftovers* out) {
  absl::MutexLock l(&mu_);
  auto it = map_.find(key);
  if (it != map_.end() && it->second.dirty) {
    if (it->second.log_seq != 0) out->log_seqs.push_back(it->second.log_seq);
    MarkClean(key, &it->second);
  }
  ForgetLocked(key, out);
}

int64_t BlockMap::SwapRepairedSlot(const BlockKey& key, uint64_t log_seq, uint32_t slot) {
  absl::MutexLock l(&mu_);
  auto it = map_.find(key);
  if (it == map_.end() || !it->second.dirty || it->second.log_seq != log_seq) return slot;
  const int64_t old = it->second.slot;
  it->second.slot = slot;
  return old;
}

void BlockMap::MoveLogRecord(const BlockKey& key, uint64_t old_seq, uint64_t new_seq,
                             const std::vector<uint32_t>& landed) {
  absl::MutexLock l(&mu_);
  auto it = map_.find(key);
  if (it == map_.end() || it->second.log_seq != old_seq) return;
  it->second.log_seq = new_seq;
  it->second.log_nodes.assign(landed.begin(), landed.end());
}

std::optional<BlockKey> BlockMap::NextDirty(bool oldest_vdi_first) {
  absl::MutexLock l(&mu_);
  if (oldest_vdi_first) {
    std::optional<uint32_t> oldest;
    int64_t since = 0;
    for (const auto& [vdi, times] : dirty_since_) {
      if (times.empty() || !dirty_order_.contains(vdi)) continue;
      if (!oldest || times.begin()->first < since) {
        oldest = vdi;
        since = times.begin()->first;
      }
    }
    if (oldest) {
      if (std::optional<BlockKey> key = PopDirtyLocked(*oldest)) return key;
    }
  }
  // The coldest VBQ queue first, and inside it the block dirtied longest ago (the queue's tail
  // end; exact LRU position is the policy's and not exposed).
  std::vector<policy::VdiStats> stats;
  policy_->AppendVdiStats(&stats);
  absl::flat_hash_map<uint32_t, uint64_t> accesses;
  for (const auto& st : stats) accesses[st.vdi] = st.accesses;
  std::vector<std::pair<uint32_t, uint64_t>> candidates;
  for (auto it = dirty_order_.begin(); it != dirty_order_.end();) {
    std::deque<BlockKey>& q = it->second;
    while (!q.empty() && !dirty_set_.contains(q.front())) q.pop_front();
    if (q.empty()) {
      dirty_order_.erase(it++);
      continue;
    }
    const auto a = accesses.find(it->first);
    candidates.emplace_back(it->first, a == accesses.end() ? 0 : a->second);
    ++it;
  }
  const std::optional<uint32_t> vdi = DestagePlanner::ColdestVdi(candidates);
  if (!vdi) return std::nullopt;
  std::deque<BlockKey>& q = dirty_order_[*vdi];
  const BlockKey key = q.front();
  q.pop_front();
  return key;
}

absl::Duration BlockMap::OldestDirtyAge(uint32_t vdi) const {
  const int64_t now = clock_->NowMicros();
  absl::MutexLock l(&mu_);
  auto v = dirty_since_.find(vdi);
  if (v == dirty_since_.end() || v->second.empty()) return absl::ZeroDuration();
  return absl::Microseconds(std::max<int64_t>(0, now - v->second.begin()->first));
}

std::optional<BlockKey> BlockMap::NextDirtyOf(uint32_t vdi) {
  absl::MutexLock l(&mu_);
  return PopDirtyLocked(vdi);
}

std::optional<BlockKey> BlockMap::PopDirtyLocked(uint32_t vdi) {
  auto it = dirty_order_.find(vdi);
  if (it == dirty_order_.end()) return std::nullopt;
  std::deque<BlockKey>& q = it->second;
  while (!q.empty() && !dirty_set_.contains(q.front())) q.pop_front();  // cleaned meanwhile
  if (q.empty()) return std::nullopt;
  const BlockKey key = q.front();
  q.pop_front();
  return key;
}

absl::Duration BlockMap::OldestDirtyAge() const {
  const int64_t now = clock_->NowMicros();
  absl::MutexLock l(&mu_);
  std::optional<int64_t> since;
  for (const auto& [vdi, times] : dirty_since_) {
    if (!times.empty()) since = std::min(since.value_or(times.begin()->first), times.begin()->first);
  }
  if (!since) return absl::ZeroDuration();
  return absl::Microseconds(std::max<int64_t>(0, now - *since));
}

void BlockMap::RequeueDirty(const BlockKey& key, bool front) {
  absl::MutexLock l(&mu_);
  if (front) {
    dirty_order_[key.vdi].push_front(key);
  } else if (dirty_set_.contains(key)) {
    dirty_order_[key.vdi].push_back(key);
  }
}

std::vector<BlockKey> BlockMap::DirtyKeys(const std::function<bool(const BlockKey&)>& keep) const {
  std::vector<BlockKey> keys;
  absl::MutexLock l(&mu_);
  for (const BlockKey& k : dirty_set_) {
    if (keep(k)) keys.push_back(k);
  }
  return keys;
}

std::vector<BlockKey> BlockMap::DirtyLoggedOn(const absl::flat_hash_set<uint32_t>& lost) const {
  std::vector<BlockKey> keys;
  absl::MutexLock l(&mu_);
  for (const BlockKey& k : dirty_set_) {
    auto e = map_.find(k);
    if (e == map_.end() || e->second.log_seq == 0) continue;
    const auto layout = vdis_->Layout(k.vdi);
    if (!layout || layout->replication < 2) continue;
    const auto& nodes = e->second.log_nodes;
    if (nodes.empty() ||
        std::any_of(nodes.begin(), nodes.end(), [&](uint32_t id) { return lost.contains(id); })) {
      keys.push_back(k);
    }
  }
  return keys;
}

std::vector<BlockKey> BlockMap::DirtyWithLogSeq(const absl::flat_hash_set<uint64_t>& seqs) const {
  std::vector<BlockKey> keys;
  absl::MutexLock l(&mu_);
  for (const BlockKey& k : dirty_set_) {
    auto e = map_.find(k);
    if (e != map_.end() && e->second.log_seq != 0 && seqs.contains(e->second.log_seq)) {
      keys.push_back(k);
    }
  }
  return keys;
}

absl::flat_hash_set<uint64_t> BlockMap::LiveLogSeqs() const {
  absl::flat_hash_set<uint64_t> live;
  absl::MutexLock l(&mu_);
  for (const BlockKey& k : dirty_set_) {
    auto it = map_.find(k);
    if (it != map_.end() && it->second.log_seq != 0) live.insert(it->second.log_seq);
  }
  return live;
}

// ---------------------------------------------------------------------------------------------
// Reclaim work

bool BlockMap::TakeWork(absl::Duration wait, ReclaimWork* w) {
  absl::MutexLock l(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return shutdown_ || !work_.empty(); };
  mu_.AwaitWithTimeout(absl::Condition(&ready), wait);
  if (shutdown_ || work_.empty()) return false;
  *w = work_.front();
  work_.pop_front();
  return true;
}

void BlockMap::AddWork(const ReclaimWork& w) {
  absl::MutexLock l(&mu_);
  work_.push_back(w);
}

void BlockMap::Shutdown() {
  absl::MutexLock l(&mu_);
  shutdown_ = true;
}

std::shared_ptr<const std::string> BlockMap::BeginDemote(const BlockKey& key) {
  absl::MutexLock l(&mu_);
  auto it = map_.find(key);
  if (it == map_.end() || !it->second.ram || placement_->TierOf(key) == policy::Tier::kRam) {
    return nullptr;
  }
  if (it->second.slot >= 0) {  // dirty: its slot already holds the data
    it->second.ram.reset();
    return nullptr;
  }
  return it->second.ram;
}

bool BlockMap::FinishDemote(const BlockKey& key, const std::shared_ptr<const std::string>& ram,
                            uint32_t slot) {
  absl::MutexLock l(&mu_);
  auto it = map_.find(key);
  if (it == map_.end() || it->second.ram != ram || it->second.slot >= 0) return false;
  it->second.slot = slot;
  it->second.ram.reset();
  return true;
}

void BlockMap::DropUndemoted(const BlockKey& key, const std::shared_ptr<const std::string>& ram,
                             Leftovers* out) {
  absl::MutexLock l(&mu_);
  auto it = map_.find(key);
  if (it != map_.end() && it->second.ram == ram && it->second.slot < 0) ForgetLocked(key, out);
}

std::optional<bool> BlockMap::EvictingDirty(const BlockKey& key) const {
  absl::MutexLock l(&mu_);
  auto it = map_.find(key);
  if (it == map_.end() || it->second.state != BlockState::kEvicting) return std::nullopt;
  return it->second.dirty;
}

void BlockMap::FinishEvict(const BlockKey& key, Leftovers* out) {
  absl::MutexLock l(&mu_);
  auto it = map_.find(key);
  if (it == map_.end() || it->second.state != BlockState::kEvicting || it->second.dirty) return;
  RemoveLocked(key, out);
}

// ---------------------------------------------------------------------------------------------
// Queries

void BlockMap::ForEach(const std::function<void(const BlockKey&, const BlockEntry&)>& fn) const {
  absl::MutexLock l(&mu_);
  for (const auto& [k, e] : map_) fn(k, e);
}

uint64_t BlockMap::dirty_blocks() const {
  // Without the map's lock: every write-back write asks (Destager::ThrottleWrite).
  return dirty_count_.load(std::memory_order_relaxed);
}

uint64_t BlockMap::cached_blocks() const {
  absl::MutexLock l(&mu_);
  return map_.size();
}

std::vector<policy::VdiStats> BlockMap::VdiStats() const {
  std::vector<policy::VdiStats> out;
  absl::MutexLock l(&mu_);
  policy_->AppendVdiStats(&out);
  return out;
}

absl::Status BlockMap::SetVdiPolicy(uint32_t vdi, const std::string& spec,
                                    const policy::PolicyContext& ctx) {
  absl::MutexLock l(&mu_);
  return policy::SetVdiPolicy(policy_.get(), vdi, spec, ctx);
}

absl::Status BlockMap::SetVdiShare(uint32_t vdi, double min, double max) {
  absl::MutexLock l(&mu_);
  return policy::SetVdiShare(policy_.get(), vdi, min, max);
}

std::string BlockMap::VdiPolicy(uint32_t vdi) const {
  absl::MutexLock l(&mu_);
  std::string own = policy::VdiPolicyOf(*policy_, vdi);
  return own.empty() ? std::string(policy_->name()) : own;
}

}  // namespace ringcache::cachenode
