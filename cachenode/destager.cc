#include "cachenode/destager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cachenode/block_writer.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace ringcache::cachenode {

Destager::Destager(const DestagerOptions& options, const DestagerContext& context,
                   metrics::Registry* registry)
    : options_(options),
      ctx_(context),
      planner_(options.planner, context.clock->NowMicros(), 0) {
  const metrics::Labels node{{"node", absl::StrCat(options.node_id)}};
  destage_bytes_ = registry->GetCounter("ringcache_cachenode_destage_bytes_total",
                                        "Dirty bytes written home by destage.", node);
  destage_errors_ = registry->GetCounter("ringcache_cachenode_destage_errors_total",
                                         "Destage attempts that failed (retried later).", node);
  write_throttle_seconds_ = registry->GetCounter(
      "ringcache_cachenode_write_throttle_seconds_total",
      "Time writes of write-back VDIs were held back because the node's dirty share was above "
      "its high watermark (slowed smoothly up to the dirty cap, at most 1 s each at the cap).",
      node);
  write_throttled_ = registry->GetCounter(
      "ringcache_cachenode_writes_throttled_total",
      "Writes of write-back VDIs held back before the dirty cap (see "
      "ringcache_cachenode_write_throttle_seconds_total).",
      node);
  obsolete_discarded_ = registry->GetCounter(
      "ringcache_cachenode_obsolete_blocks_discarded_total",
      "Dirty blocks a data node refused as older than its copy (another owner wrote a newer "
      "version): discarded instead of destaged.",
      node);
}

Destager::~Destager() { Stop(); }

void Destager::Start() {
  reclaimer_ = std::thread([this] {
    while (!stop_.load()) ReclaimStep(absl::Milliseconds(200));
  });
  destager_ = std::thread([this] {
    while (!stop_.load()) {
      ctx_.clock->SleepFor(absl::Milliseconds(50));
      if (!stop_.load()) DestageTick();
    }
  });
}

void Destager::Stop() {
  stop_.store(true);
  ctx_.map->Shutdown();
  if (reclaimer_.joinable()) reclaimer_.join();
  if (destager_.joinable()) destager_.join();
}

void Destager::SetPlannedHookForTest(std::function<void()> hook) {
  absl::MutexLock l(&hook_mu_);
  planned_hook_ = std::move(hook);
}

// ---------------------------------------------------------------------------------------------
// Destage

absl::Status Destager::ReadRun(const BlockKey& key, uint64_t object, uint64_t base,
                               const DestageRun& run, std::string* data) {
  const uint32_t bs = options_.block_size;
  data->assign(run.blocks.size() * bs, '\0');
  for (size_t i = 0; i < run.blocks.size(); ++i) {
    char* dst = data->data() + i * bs;
    const DirtyCopy& b = run.blocks[i];
    if (b.ram) {
      std::memcpy(dst, b.ram->data(), bs);
      continue;
    }
    const uint64_t block = run.first_block + i;
    absl::Status s =
        ctx_.repair->ReadBlock(BlockKey{key.vdi, block}, object,
                               static_cast<uint32_t>(block - base),
                               static_cast<uint32_t>(b.slot), /*dirty=*/true, dst);
    if (!s.ok()) {
      spdlog::error("cache node {}: dirty block {}/{} unreadable: {}", options_.node_id, key.vdi,
                    block, s.ToString());
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status Destager::DiscardObsolete(const BlockKey& key, const absl::Status& refusal) {
  // A home holds a newer version: another node owned the object after this one accepted the
  // write (this node lost it while down or cut off). Our copy is obsolete: discard it, never
  // serve it again; its log record goes with it.
  spdlog::warn("cache node {}: dirty block {}/{} is older than its home copy ({}); discarding it",
               options_.node_id, key.vdi, key.block, std::string(refusal.message()));
  obsolete_discarded_->Increment();
  Leftovers left;
  ctx_.map->DiscardObsolete(key, &left);
  GiveBack(left, ctx_.slots, ctx_.log).IgnoreError();
  return absl::OkStatus();
}

absl::StatusOr<bool> Destager::PrepareRun(const VdiInfo& v, const BlockKey& key, bool single,
                                          PreparedRun* p) {
  const uint64_t per_obj = v.blocks_per_object();
  p->v = v;
  p->key = key;
  p->object = key.block / per_obj;
  p->base = p->object * per_obj;
  std::optional<DestageRun> run =
      ctx_.map->PlanDestage(key, per_obj, single ? 1 : options_.destage_max_blocks);
  if (!run) return false;
  p->run = *std::move(run);
  std::function<void()> planned_hook;
  {
    absl::MutexLock l(&hook_mu_);
    planned_hook = planned_hook_;
  }
  if (planned_hook) planned_hook();
  RC_RETURN_IF_ERROR(ReadRun(key, p->object, p->base, p->run, &p->data));
  // Stamp each block with its log record's sequence (a fresh one where it has none), so replay
  // never puts an older record over what this destage wrote.
  p->stamp = datanode::HomeStamp{options_.node_id, {}, false, {}};
  p->unlogged = 0;
  for (const DirtyCopy& b : p->run.blocks) p->unlogged += b.log_seq == 0;
  uint64_t fresh = 0;
  if (p->unlogged > 0) {
    RC_ASSIGN_OR_RETURN(fresh, ctx_.log->Reserve(p->unlogged));
  }
  p->fresh = fresh;
  const uint64_t now_epoch = ctx_.owner->epoch();
  for (const DirtyCopy& b : p->run.blocks) {
    p->stamp.seqs.push_back(b.log_seq != 0 ? b.log_seq : fresh++);
    // A block without a log record (N = 1) was accepted at some epoch this node still holds
    // the object at; recovered blocks of older files carry 0.
    p->stamp.epochs.push_back(b.log_seq != 0 || b.epoch != 0 ? b.epoch : now_epoch);
  }
  return true;
}

absl::Status Destager::SettleRun(const PreparedRun& p, const absl::Status& s,
                                 uint64_t* blocks_done) {
  if (p.unlogged > 0) ctx_.log->Done(p.fresh);
  const BlockKey& key = p.key;
  if (IsKind(s, ErrorKind::kOlderVersion) && p.run.blocks.size() > 1) {
    // Some block of the run is older than a home's copy: settle the blocks one by one.
    for (size_t i = 0; i < p.run.blocks.size(); ++i) {
      RC_RETURN_IF_ERROR(DestageAround(p.v, BlockKey{key.vdi, p.run.first_block + i},
                                       blocks_done, /*single=*/true));
    }
    return absl::OkStatus();
  }
  if (IsKind(s, ErrorKind::kOlderVersion)) {
    return DiscardObsolete(BlockKey{key.vdi, p.run.first_block}, s);
  }
  if (!s.ok()) {
    destage_errors_->Increment();
    return s;
  }
  destage_bytes_->Increment(static_cast<double>(p.data.size()));
  p.v.counters->destaged_bytes += p.data.size();
  std::vector<uint32_t> clean_slots;
  Leftovers left;
  ctx_.map->MarkDestaged(key.vdi, p.run.first_block, p.run.blocks.size(), &clean_slots, &left);
  GiveBack(left, ctx_.slots, ctx_.log).IgnoreError();
  for (uint32_t slot : clean_slots) ctx_.slots->SetDirty(slot, false).IgnoreError();
  ctx_.map->NoteDestagedShadows(key.vdi, p.run.first_block, p.run.blocks.size());
  if (blocks_done) *blocks_done += p.run.blocks.size();
  return absl::OkStatus();
}

absl::Status Destager::DestageAround(const VdiInfo& v, const BlockKey& key,
                                     uint64_t* blocks_done, bool single) {
  PreparedRun p;
  RC_ASSIGN_OR_RETURN(const bool planned, PrepareRun(v, key, single, &p));
  if (!planned) return absl::OkStatus();
  const absl::Status s = ctx_.pool->WriteAll(
      key.vdi, p.object, static_cast<uint32_t>(p.run.first_block - p.base), p.data,
      v.geometry.replication(), &p.stamp);
  return SettleRun(p, s, blocks_done);
}

void Destager::DestageTick() {
  const int64_t now = ctx_.clock->NowMicros();
  const uint64_t fg = fg_blocks_.load();
  const DestagePlanner::Decision d =
      planner_.Tick(now, fg, ctx_.map->dirty_blocks(), ctx_.log->over_limit(),
                    absl::ToInt64Microseconds(ctx_.map->OldestDirtyAge()));
  // Fenced: the objects may have a new owner already, and the gateway may have replayed this
  // node's log and dropped it. Neither destage nor log again: a record written after that
  // replay would outlive it, and a later replay of this node would put it over the newer data
  // of the objects' new owners (a node cut off from every data node relogs after
  // relog_after_ms, and its appends can land once the link is back).
  if (!ctx_.check_owner().ok()) return;
  if (now - last_relog_check_us_ >= 1000000) {
    last_relog_check_us_ = now;
    RelogFromLostDataNodes();
  }
  if (const uint32_t vdi = vdi_at_cap_.exchange(0); vdi != 0) {
    // A VDI's writers wait at its cap: its blocks first, unpaced.
    DestagePlanner::Decision capped = d;
    capped.forcing = true;
    capped.speed = 0;
    DestageBatch(capped, fg, vdi);
    return;
  }
  if (d.destage()) DestageBatch(d, fg);
}

void Destager::DestageBatch(const DestagePlanner::Decision& d, uint64_t fg_at_tick,
                            uint32_t only_vdi) {
  // Oldest dirty blocks first, until load returns (idle) or the planner's pace says pause
  // (forced or aging under load). Aging alone takes the VDI with the oldest dirty block first.
  const bool idle = d.idle;
  const bool by_age = d.aging && !d.forcing && !d.idle;
  const int64_t batch_start = ctx_.clock->NowMicros();
  uint64_t bytes = 0;
  for (int n = 0; n < 64 && !stop_.load();) {
    if (n > 0 && !ctx_.check_owner().ok()) break;  // fenced during the batch
    // Up to destage_batch_runs dirty blocks, each the seed of a run of its object, written
    // home together: one request and one commit per data node (DataNodePool::WriteAllBatch).
    std::vector<std::pair<BlockKey, VdiInfo>> seeds;
    bool stop_after = false;
    while (seeds.size() < options_.destage_batch_runs && n < 64) {
      const std::optional<BlockKey> key =
          only_vdi != 0 ? ctx_.map->NextDirtyOf(only_vdi) : ctx_.map->NextDirty(by_age);
      if (!key) {
        stop_after = true;
        break;
      }
      auto v = ctx_.vdis->Get(key->vdi);
      if (!v.ok()) {
        ctx_.map->RequeueDirty(*key);  // not registered yet; later
        stop_after = true;
        break;
      }
      seeds.emplace_back(*key, *std::move(v));
      ++n;
    }
    if (seeds.empty()) break;
    const int64_t one_start = ctx_.clock->NowMicros();
    uint64_t done = 0;
    if (!DestageSeeds(seeds, &done, /*requeue=*/true).ok()) stop_after = true;
    bytes += done * options_.block_size;
    const bool load = fg_blocks_.load() != fg_at_tick;
    if (!idle && load && !ctx_.log->over_limit()) {
      // Forced under load (not log pushback, which destages at full speed).
      const int64_t now = ctx_.clock->NowMicros();
      const int64_t pause =
          planner_.PauseMicros(bytes, now - batch_start, now - one_start, d.speed);
      if (pause > 0) ctx_.clock->SleepFor(absl::Microseconds(pause));
    }
    if (stop_after || (idle && load)) break;  // failed, nothing left, or load returned
  }
}

absl::Status Destager::DestageSeeds(const std::vector<std::pair<BlockKey, VdiInfo>>& seeds,
                                    uint64_t* blocks_done, bool requeue) {
  // The seeds' stripes, each once, in address order: the only holder of several stripes at once
  // takes them so (every other holder takes one), so this never deadlocks.
  std::vector<absl::Mutex*> locks;
  for (const auto& [key, v] : seeds) locks.push_back(&ctx_.stripes->Of(key.vdi, v.ObjectOf(key)));
  std::sort(locks.begin(), locks.end());
  locks.erase(std::unique(locks.begin(), locks.end()), locks.end());
  for (absl::Mutex* mu : locks) mu->Lock();
  absl::Status failed;  // the first failure
  std::vector<std::pair<BlockKey, VdiInfo>> runs_after;
  std::vector<PreparedRun> runs;
  runs.reserve(seeds.size());
  for (const auto& [key, v] : seeds) {
    // A seed inside a run planned already goes home with it (and back to the queue with it,
    // should that fail).
    const auto covering = std::find_if(runs.begin(), runs.end(), [&](const PreparedRun& r) {
      return r.key.vdi == key.vdi && key.block >= r.run.first_block &&
             key.block < r.run.first_block + r.run.blocks.size();
    });
    if (covering != runs.end()) {
      covering->riders.push_back(key);
      continue;
    }
    PreparedRun p;
    absl::StatusOr<bool> planned = PrepareRun(v, key, /*single=*/false, &p);
    const bool overlaps = planned.ok() && *planned &&
                          std::any_of(runs.begin(), runs.end(), [&](const PreparedRun& r) {
                            return r.key.vdi == key.vdi &&
                                   p.run.first_block < r.run.first_block + r.run.blocks.size() &&
                                   r.run.first_block < p.run.first_block + p.run.blocks.size();
                          });
    if (overlaps) {
      // Around a block of a run planned already (that one was cut at destage_max_blocks):
      // the next batch takes it.
      if (p.unlogged > 0) ctx_.log->Done(p.fresh);
      if (requeue) {
        ctx_.map->RequeueDirty(key);
      } else {
        runs_after.emplace_back(key, v);
      }
      continue;
    }
    if (!planned.ok()) {
      if (requeue) ctx_.map->RequeueDirty(key);
      if (failed.ok()) failed = planned.status();
      continue;
    }
    if (*planned) runs.push_back(std::move(p));
  }
  std::vector<absl::Status> written;
  if (runs.size() == 1) {
    const PreparedRun& p = runs[0];
    written.push_back(ctx_.pool->WriteAll(
        p.key.vdi, p.object, static_cast<uint32_t>(p.run.first_block - p.base), p.data,
        p.v.geometry.replication(), &p.stamp));
  } else if (!runs.empty()) {
    std::vector<datanode::RunWrite> batch;
    batch.reserve(runs.size());
    for (const PreparedRun& p : runs) {
      batch.push_back({p.key.vdi, p.object, static_cast<uint32_t>(p.run.first_block - p.base),
                       &p.data, static_cast<int>(p.v.geometry.replication()), p.stamp});
    }
    written = ctx_.pool->WriteAllBatch(batch);
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    if (absl::Status s = SettleRun(runs[i], written[i], blocks_done); !s.ok()) {
      if (requeue) {
        ctx_.map->RequeueDirty(runs[i].key);
        for (const BlockKey& k : runs[i].riders) ctx_.map->RequeueDirty(k);
      }
      if (failed.ok()) failed = s;
    }
  }
  for (auto mu = locks.rbegin(); mu != locks.rend(); ++mu) (*mu)->Unlock();
  // Not queued (a flush's): the seeds around a run cut short go in a batch of their own.
  if (!runs_after.empty() && failed.ok()) return DestageSeeds(runs_after, blocks_done, false);
  return failed;
}

absl::Duration Destager::ThrottleWrite(const VdiInfo& v, absl::Time deadline) {
  const int64_t delay = planner_.WriteDelayMicros(ctx_.map->dirty_blocks());
  const bool vdi_at_cap = planner_.VdiAtCap(v.counters->dirty_blocks.load());
  if (delay == 0 && !vdi_at_cap) return absl::ZeroDuration();
  const int64_t start = ctx_.clock->NowMicros();
  if (delay > 0 && !vdi_at_cap) {
    ctx_.clock->SleepFor(std::min(absl::Microseconds(delay), deadline - absl::Now()));
  } else {
    // At a cap: destage runs unpaced (the VDI's blocks first at its own cap); wait for it to
    // bring the node or the VDI under, at most a second (then the write goes on: slots are
    // there, the cap is where writers are held, not refused).
    if (vdi_at_cap) vdi_at_cap_.store(v.id());
    auto held = [&] {
      return planner_.AtCap(ctx_.map->dirty_blocks()) ||
             planner_.VdiAtCap(v.counters->dirty_blocks.load());
    };
    for (int i = 0; i < 200 && held() && absl::Now() < deadline; ++i) {
      ctx_.clock->SleepFor(absl::Milliseconds(5));
    }
  }
  const int64_t waited = std::max<int64_t>(0, ctx_.clock->NowMicros() - start);
  write_throttle_seconds_->Increment(static_cast<double>(waited) / 1e6);
  write_throttled_->Increment();
  return absl::Microseconds(waited);
}

absl::Status Destager::Flush(uint32_t vdi, const ring::Ring* moving_under) {
  // Not gated by ownership (the gateway settles a fenced node through it), but a failed SSD
  // cannot vouch for its slots: the gateway replays the log instead (kDeviceFailed).
  RC_RETURN_IF_ERROR(ctx_.slots->failed());
  // One pass over the blocks dirty when the flush began, each destaged in its newest copy. A
  // block written while the flush runs may stay dirty: a pass repeated until no dirty block is
  // left never ends while a writer is faster than destage (handoffs and removals hold their
  // writers, so nothing of theirs is left).
  std::vector<BlockKey> keys = ctx_.map->DirtyKeys([&](const BlockKey& k) {
    if (vdi != 0 && k.vdi != vdi) return false;
    if (moving_under == nullptr) return true;
    const auto layout = ctx_.vdis->Layout(k.vdi);
    if (!layout) return false;
    const ring::ObjectKey object{k.vdi, k.block / layout->blocks_per_object};
    return moving_under->Owner(object) != options_.node_id;  // else it stays here
  });
  std::sort(keys.begin(), keys.end(), [](const BlockKey& a, const BlockKey& b) {
    return a.vdi != b.vdi ? a.vdi < b.vdi : a.block < b.block;
  });
  // In batches, as the destager's (nothing to do for a block destaged meanwhile).
  std::vector<std::pair<BlockKey, VdiInfo>> seeds;
  for (size_t i = 0; i < keys.size(); ++i) {
    RC_ASSIGN_OR_RETURN(VdiInfo v, ctx_.vdis->Get(keys[i].vdi));
    seeds.emplace_back(keys[i], std::move(v));
    if (seeds.size() == options_.destage_batch_runs || i + 1 == keys.size()) {
      RC_RETURN_IF_ERROR(DestageSeeds(seeds, nullptr, /*requeue=*/false));
      seeds.clear();
    }
  }
  ctx_.log->ReclaimNow().IgnoreError();  // a down data node's copies are collected later
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Reclaim

void Destager::ReclaimStep(absl::Duration wait) {
  ReclaimWork w;
  if (!ctx_.map->TakeWork(wait, &w)) {
    for (const ReclaimWork& r : retry_) ctx_.map->AddWork(r);
    retry_.clear();
    return;
  }
  if (!ProcessWork(w).ok()) {
    retry_.push_back(w);  // data node down, VDI not registered yet...: try again later
    ctx_.clock->SleepFor(absl::Milliseconds(20));
  }
}

absl::Status Destager::Demote(const BlockKey& key, bool retried) {
  const std::shared_ptr<const std::string> ram = ctx_.map->BeginDemote(key);
  if (!ram) return absl::OkStatus();
  // An exclusive node frees slots to keep its slot reserve free (a no-op otherwise).
  Leftovers freed;
  ctx_.map->RelieveSlotPressure(ctx_.slots->free_slots(), 1, &freed);
  GiveBack(freed, ctx_.slots, ctx_.log).IgnoreError();
  auto got = ctx_.slots->Allocate();  // never wait: this thread is the one that frees slots
  if (!got.ok() && !retried && ctx_.map->exclusive()) {
    // An exclusive node: the members it shed are queued before this retry, so their slots are
    // free by the time it runs (unless dirty and not destaged yet).
    ctx_.map->AddWork({key, true, true});
    return absl::OkStatus();
  }
  if (!got.ok()) {
    // No room on SSD: a clean block may simply leave the cache.
    Leftovers left;
    ctx_.map->DropUndemoted(key, ram, &left);
    GiveBack(left, ctx_.slots, ctx_.log).IgnoreError();
    return absl::OkStatus();
  }
  RC_RETURN_IF_ERROR(ctx_.slots->WriteSlot(*got, key, false, ram->data()));
  if (auto c = ctx_.vdis->Counters(key.vdi)) ++c->ssd_writes;
  // Changed meanwhile (rewritten, removed): our copy is not needed.
  if (!ctx_.map->FinishDemote(key, ram, *got)) ctx_.slots->Release(*got).IgnoreError();
  return absl::OkStatus();
}

absl::Status Destager::ProcessWork(const ReclaimWork& w) {
  RC_ASSIGN_OR_RETURN(VdiInfo v, ctx_.vdis->Get(w.key.vdi));  // not registered yet: later
  absl::MutexLock stripe(&ctx_.stripes->Of(w.key.vdi, v.ObjectOf(w.key)));
  if (w.demote) return Demote(w.key, w.retried);
  const std::optional<bool> dirty = ctx_.map->EvictingDirty(w.key);
  if (!dirty) return absl::OkStatus();
  if (*dirty) {
    // "Destage before eviction" is a background write home like any other: never while this
    // node is fenced (it may have lost the object; its log may have been replayed already).
    RC_RETURN_IF_ERROR(ctx_.check_owner());
    RC_RETURN_IF_ERROR(DestageAround(v, w.key, nullptr));
  }
  Leftovers left;
  ctx_.map->FinishEvict(w.key, &left);
  return GiveBack(left, ctx_.slots, ctx_.log);
}

// ---------------------------------------------------------------------------------------------
// Relog

void Destager::RelogFromLostDataNodes() {
  const std::vector<uint32_t> down = ctx_.pool->DownFor(options_.relog_after_ms);
  const absl::flat_hash_set<uint32_t> down_set(down.begin(), down.end());
  for (auto it = relogged_.begin(); it != relogged_.end();) {
    if (!down_set.contains(*it)) {
      relogged_.erase(it++);  // back: its copies count again
    } else {
      ++it;
    }
  }
  absl::flat_hash_set<uint32_t> fresh;
  for (uint32_t id : down) {
    if (!relogged_.contains(id)) fresh.insert(id);
  }
  // A data node back on a new or wiped disk (another store incarnation) lost every log copy it
  // held, although it answers: its records are made again once per change.
  absl::flat_hash_map<uint32_t, uint64_t> new_store;
  for (uint32_t id : ctx_.pool->node_ids()) {
    const uint64_t changes = ctx_.pool->StoreChanges(id);
    if (changes != store_changes_seen_[id]) {
      new_store[id] = changes;
      fresh.insert(id);
    }
  }
  // A data node taken out of the data ring (down too long, `datanode out`, decommissioned)
  // keeps its copies, but no replay reads them any more: made again once.
  const datanode::DataRing ring = ctx_.pool->ring();
  for (auto it = relogged_out_.begin(); it != relogged_out_.end();) {
    if (!ring.IsOut(*it)) {
      relogged_out_.erase(it++);  // in again (cleared first): nothing of ours is left there
    } else {
      ++it;
    }
  }
  absl::flat_hash_set<uint32_t> newly_out;
  for (uint32_t id : ring.out) {
    if (!relogged_out_.contains(id)) {
      newly_out.insert(id);
      fresh.insert(id);
    }
  }
  if (fresh.empty()) return;
  // Dirty blocks whose log record landed on a lost node — where it actually landed, not where
  // today's ring would put it (the ring may have changed since) — or whose landing is unknown
  // (recovered after a restart: relogging is harmless, missing a copy is not).
  const std::vector<BlockKey> todo = ctx_.map->DirtyLoggedOn(fresh);
  spdlog::warn("cache node {}: {} data node(s) unreachable for {} ms, back on a new disk ({}) "
               "or out of the data ring ({}); logging {} dirty blocks again",
               options_.node_id, fresh.size(), options_.relog_after_ms, new_store.size(),
               newly_out.size(), todo.size());
  for (const BlockKey& k : todo) {
    auto v = ctx_.vdis->Get(k.vdi);
    if (!v.ok()) continue;
    absl::MutexLock stripe(&ctx_.stripes->Of(k.vdi, v->ObjectOf(k)));
    if (absl::Status s = RelogBlock(*v, k); !s.ok()) {
      spdlog::warn("cache node {}: relog of block {}/{} failed: {}; retrying later",
                   options_.node_id, k.vdi, k.block, s.ToString());
      return;  // not marked handled: the next check tries again
    }
  }
  for (uint32_t id : fresh) {
    if (!new_store.contains(id)) relogged_.insert(id);
  }
  for (const auto& [id, changes] : new_store) store_changes_seen_[id] = changes;
  relogged_out_.insert(newly_out.begin(), newly_out.end());
  spdlog::warn("cache node {}: {} dirty blocks logged again: every one has its log copies",
               options_.node_id, todo.size());
}

absl::StatusOr<uint32_t> Destager::RelogRecords(const absl::flat_hash_set<uint64_t>& seqs) {
  // A fenced node logs nothing again (see DestageTick): its blocks are replayed by others.
  RC_RETURN_IF_ERROR(ctx_.check_owner());
  uint32_t done = 0;
  for (const BlockKey& k : ctx_.map->DirtyWithLogSeq(seqs)) {
    auto v = ctx_.vdis->Get(k.vdi);
    if (!v.ok()) continue;  // dropped meanwhile
    absl::MutexLock stripe(&ctx_.stripes->Of(k.vdi, v->ObjectOf(k)));
    const std::optional<DirtyCopy> copy = ctx_.map->DirtyBlock(k);
    if (!copy || !seqs.contains(copy->log_seq)) continue;  // destaged or rewritten meanwhile
    RC_RETURN_IF_ERROR(RelogBlock(*v, k));
    ++done;
  }
  if (done > 0) {
    spdlog::warn("cache node {}: {} dirty blocks logged again (a scrub found their log records "
                 "damaged)",
                 options_.node_id, done);
  }
  return done;
}

absl::Status Destager::RelogBlock(const VdiInfo& v, const BlockKey& key) {
  const uint32_t bs = options_.block_size;
  const uint64_t per_obj = v.blocks_per_object();
  const uint64_t object = key.block / per_obj;
  const auto in_object = static_cast<uint32_t>(key.block % per_obj);
  const std::optional<DirtyCopy> copy = ctx_.map->DirtyBlock(key);
  if (!copy || copy->log_seq == 0) return absl::OkStatus();
  std::string data(bs, '\0');
  if (copy->ram) {
    std::memcpy(data.data(), copy->ram->data(), bs);
  } else if (copy->slot >= 0) {
    RC_RETURN_IF_ERROR(ctx_.repair->ReadBlock(key, object, in_object,
                                              static_cast<uint32_t>(copy->slot), true,
                                              data.data()));
  } else {
    return absl::OkStatus();
  }
  RC_ASSIGN_OR_RETURN(const uint64_t seq, ctx_.log->Reserve(1));
  std::vector<uint32_t> landed;
  // The new record keeps the write's fencing token.
  absl::Status s = ctx_.log->Append(key.vdi, object, in_object, bs, data.data(), 1,
                                    static_cast<int>(v.geometry.replication()), seq,
                                    copy->epoch, nullptr, &landed);
  if (s.ok() && copy->slot >= 0) {
    // The slot must name the new record before the old one goes (restart, collector).
    s = ctx_.slots->SetLogSeq(static_cast<uint32_t>(copy->slot), seq);
    if (s.ok()) s = ctx_.slots->Sync();
  }
  if (s.ok()) ctx_.map->MoveLogRecord(key, copy->log_seq, seq, landed);
  ctx_.log->Done(seq);
  if (s.ok()) ctx_.log->Retire(copy->log_seq);
  return s;
}

}  // namespace ringcache::cachenode
